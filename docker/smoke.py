"""``make docker-test``'s checks, against the real container.

Runs the image locked down (``--read-only --tmpfs /tmp --cap-drop ALL --security-opt
no-new-privileges``), on a port of 127.0.0.1 only, and checks what a course relies on:
/healthz within a few seconds, an op, an expression, the page and every asset it loads,
/docs and its assets, no external URL in anything the sandbox itself serves, /metrics
(when the route exists), a GLASSLLM_* limit set with ``-e``, a bad one refused at start,
the image's HEALTHCHECK, workers from the CPU quota, ``docker stop`` under 2 s with
exit code 0, and ``pip install "glassllm[client]"`` from the sandbox's /simple/ alone.
Prints the image's size, its base's, what the project adds, and the start time. Any
failure exits 1 with the reason; nothing is skipped silently.

    python docker/smoke.py [--image glassllm:latest] [--docker docker]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx

LOCKED_DOWN = ["--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL",
               "--security-opt", "no-new-privileges"]
HEALTHY_WITHIN_S = 20.0       # fail line, for a CI machine shared with other jobs; target 2 s
STOP_WITHIN_S = 2.0
# XML namespace names (xmlns="http://www.w3.org/2000/svg") are identifiers a browser never
# fetches; every other host named by the sandbox's own files is a failure.
NAMESPACE_HOSTS = {"www.w3.org"}
URL = re.compile(r"https?://([A-Za-z0-9.\-\[\]:]+)")

DOCKER = "docker"
failures: list[str] = []


class Failed(Exception):
    """One check failed; the message says which and why."""


def docker(*args: str, check: bool = True, timeout: float = 60) -> str:
    r = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise Failed(f"docker {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout.strip()


def check(name: str):
    """Run one check; print ``ok`` or ``FAIL`` and remember the failure."""

    def wrap(fn):
        def run(*args, **kwargs):
            try:
                detail = fn(*args, **kwargs)
            except (Failed, AssertionError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                failures.append(f"{name}: {exc}")
                print(f"FAIL {name}: {exc}", flush=True)
                return None
            print(f"ok   {name}{': ' + detail if detail else ''}", flush=True)
            return detail

        return run

    return wrap


def mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


# --- a container ------------------------------------------------------------------------

def start(image: str, *extra: str, env: dict[str, str] | None = None) -> tuple[str, str, float]:
    """``docker run -d`` locked down; returns (id, base URL, seconds to a 200 /healthz)."""
    env_args = [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
    t0 = time.perf_counter()
    cid = docker("run", "-d", *LOCKED_DOWN, "-p", "127.0.0.1::8000", *env_args, *extra, image)
    port = docker("port", cid, "8000/tcp").splitlines()[0].rsplit(":", 1)[1]
    url = f"http://127.0.0.1:{port}"
    while time.perf_counter() - t0 < HEALTHY_WITHIN_S:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return cid, url, time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        if docker("inspect", "-f", "{{.State.Running}}", cid) != "true":
            raise Failed(f"the container exited: {docker('logs', cid, check=False)[-2000:]}")
        time.sleep(0.05)
    logs = subprocess.run([DOCKER, "logs", cid], capture_output=True, text=True).stderr
    raise Failed(f"/healthz not 200 within {HEALTHY_WITHIN_S} s; logs:\n{logs[-2000:]}")


def cpu_seconds(cid: str) -> str:
    """CPU time the container has used (cgroup v1 cpuacct or v2 cpu.stat), for reading a
    start time taken on a loaded machine; "n/a" where the host hides it."""
    full = docker("inspect", "-f", "{{.Id}}", cid)
    for path, scale in ((f"/sys/fs/cgroup/cpuacct/docker/{full}/cpuacct.usage", 1e-9),
                        (f"/sys/fs/cgroup/system.slice/docker-{full}.scope/cpu.stat", 1e-6),
                        (f"/sys/fs/cgroup/docker/{full}/cpu.stat", 1e-6)):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        value = int(text.split()[1] if text.startswith("usage_usec") else text.split()[0])
        return f"{value * scale:.2f} s"
    return "n/a"


def remove(cid: str) -> None:
    docker("rm", "-f", cid, check=False)


# --- the checks -------------------------------------------------------------------------

@check("sizes")
def sizes(image: str) -> str:
    size = int(docker("image", "inspect", "-f", "{{.Size}}", image))
    base = docker("image", "inspect", "-f",
                  '{{index .Config.Labels "org.opencontainers.image.base.name"}}', image)
    if not base or base == "<no value>":
        raise Failed(f"{image} has no org.opencontainers.image.base.name label")
    base_size = int(docker("image", "inspect", "-f", "{{.Size}}", base))
    added = size - base_size
    verdict = "within" if added <= 130e6 else "OVER"
    return (f"image {mb(size)}, base {base} {mb(base_size)}, the project adds {mb(added)}"
            f" ({verdict} the 130 MB target)")


@check("non-root, no compiler, no pip in the image")
def hardened(image: str) -> str:
    user = docker("image", "inspect", "-f", "{{.Config.User}}", image)
    assert user and not user.startswith(("0", "root")), f"Config.User is {user!r}"
    found = docker("run", "--rm", "--entrypoint", "sh", image, "-c",
                   "for t in gcc cc c++ make pip pip3; do command -v $t; done; true")
    assert found == "", f"build tools in the final image: {found.split()}"
    return f"user {user}"


@check("an op call")
def op_call(url: str) -> str:
    r = httpx.post(f"{url}/api/v1/ops/softmax_np", json={"inputs": {"x": [[1000.0, 1000.0]]}})
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    assert r.json()["value"] == [[0.5, 0.5]], r.text[:300]
    return "softmax_np([[1000, 1000]]) = [[0.5, 0.5]]"


@check("an expression")
def expression(url: str) -> str:
    body = {"expression": "(x*x).sum()",
            "variables": {"x": {"value": [1.0, 2.0, 3.0], "requires_grad": True}}}
    r = httpx.post(f"{url}/api/v1/eval", json=body)
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    out = r.json()
    assert (out["value"], out["grads"]["x"]) == (14.0, [2.0, 4.0, 6.0]), r.text[:300]
    return "(x*x).sum() = 14, grad [2, 4, 6]"


def local_refs(base: str, text: str) -> list[str]:
    """Same-origin URLs a page or module loads: src=/href= and ES-module imports."""
    refs = re.findall(r'(?:src|href)="([^"#]+)"', text)
    refs += re.findall(r'(?:import|from)\s*[("\']+(\.{0,2}/[^"\']+\.js)["\']', text)
    out = []
    for ref in refs:
        if ref.startswith("data:"):
            continue
        full = urljoin(base, ref)
        if urlsplit(full).netloc == urlsplit(base).netloc:
            out.append(full)
    return out


def crawl(start_url: str) -> dict[str, str]:
    """GET a page and, transitively, every same-origin asset it loads; all must be 200."""
    seen: dict[str, str] = {}
    todo = [start_url]
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        r = httpx.get(u)
        assert r.status_code == 200, f"{u}: {r.status_code}"
        assert r.content, f"{u}: empty body"
        seen[u] = r.text
        # follow the page's own files, not a vendored bundle's string templates
        if u == start_url or (u.endswith((".js", ".css")) and "/docs-assets/" not in u):
            todo += [ref for ref in local_refs(u, r.text) if ref not in seen]
    return seen


def external_hosts(bodies: dict[str, str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for u, text in bodies.items():
        hosts = {h for h in URL.findall(text) if h.split(":")[0] not in
                 {"127.0.0.1", "localhost", *NAMESPACE_HOSTS}}
        if hosts:
            found[u] = hosts
    return found


@check("the page and its assets, /docs and its assets, no external URL served")
def page_and_docs(url: str) -> str:
    page = crawl(f"{url}/")
    assert any(u.endswith(".js") for u in page) and any(u.endswith(".css") for u in page), \
        f"the page loads no script or style: {sorted(page)}"
    docs = crawl(f"{url}/docs")
    assets = {u for u in docs if "/docs-assets/" in u}
    assert len(assets) >= 2, f"/docs loads {sorted(docs)}"
    api = {f"{url}{p}": httpx.get(f"{url}{p}").text
           for p in ("/openapi.json", "/api/v1/ops", "/api/v1/examples")}
    # The sandbox's own text: the page, its scripts and styles, /docs' HTML, the API.
    own = {**page, **{u: t for u, t in docs.items() if u not in assets}, **api}
    bad = external_hosts(own)
    assert not bad, f"external URLs served: {bad}"
    # Swagger UI's vendored bundle names hosts in licence comments and spec links; the
    # Chromium test (tests/page/test_swagger_ui.py) proves /docs requests none of them.
    named = sorted(set().union(*external_hosts({u: docs[u] for u in assets}).values()))
    print(f"     note: Swagger UI's vendored assets name {len(named)} hosts as text "
          f"(licences, spec links), none loaded by /docs")
    return f"{len(page)} page files, {len(docs)} /docs files, {len(api)} API documents"


@check("/metrics")
def metrics(url: str) -> str:
    r = httpx.get(f"{url}/metrics")
    if r.status_code == 404:
        print("     SKIP /metrics: the route is not there yet (404): the load issue has not"
              " landed", flush=True)
        return "absent (404), skipped loudly"
    assert r.status_code == 200, f"{r.status_code} {r.text[:200]}"
    assert "# TYPE" in r.text or "# HELP" in r.text, f"not Prometheus text: {r.text[:200]}"
    return f"{len(r.text.splitlines())} lines of Prometheus text"


@check("the image's HEALTHCHECK reports healthy")
def healthcheck(cid: str) -> str:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 30:
        status = docker("inspect", "-f", "{{.State.Health.Status}}", cid)
        if status == "healthy":
            return f"after {time.perf_counter() - t0:.1f} s more"
        if status == "unhealthy":
            raise Failed(docker("inspect", "-f", "{{json .State.Health.Log}}", cid))
        time.sleep(0.5)
    raise Failed(f"still {status!r} after 30 s")


@check("workers follow the CPU quota")
def workers(cid: str, expected: int) -> str:
    logs = subprocess.run([DOCKER, "logs", cid], capture_output=True, text=True)
    started = len(re.findall(r"Started server process", logs.stdout + logs.stderr))
    assert started == expected, f"{started} worker(s) started, expected {expected}"
    return f"{started} worker(s)"


@check("docker stop: under 2 s, exit code 0")
def stop(cid: str) -> str:
    t0 = time.perf_counter()
    docker("stop", cid)
    took = time.perf_counter() - t0
    code = docker("inspect", "-f", "{{.State.ExitCode}}", cid)
    assert code == "0", f"exit code {code}"
    assert took < STOP_WITHIN_S, f"took {took:.2f} s"
    return f"{took:.2f} s, exit code 0"


@check("GLASSLLM_MAX_BODY_BYTES=1000 set with -e takes effect (413)")
def env_limit(image: str) -> str:
    cid, url, _ = start(image, "--cpus", "1", env={"GLASSLLM_MAX_BODY_BYTES": "1000"})
    try:
        small = httpx.post(f"{url}/api/v1/ops/softmax_np", json={"inputs": {"x": [1.0, 2.0]}})
        assert small.status_code == 200, f"a small body: {small.status_code}"
        big = httpx.post(f"{url}/api/v1/ops/softmax_np",
                         json={"inputs": {"x": [1.0] * 400}})
        assert big.status_code == 413, f"a 2 kB body: {big.status_code} {big.text[:200]}"
        workers(cid, 1)                              # --cpus 1: one worker
    finally:
        remove(cid)
    return f"small body 200, {len(big.request.content)}-byte body 413"


@check("a bad GLASSLLM_* value stops the container, named")
def env_refused(image: str) -> str:
    r = subprocess.run([DOCKER, "run", "--rm", *LOCKED_DOWN, "-e", "GLASSLLM_MAX_CONCURRENCY=0",
                        image], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, "it started"
    assert "GLASSLLM_MAX_CONCURRENCY='0'" in r.stderr, r.stderr[-500:]
    return f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1][:90]}"


INSTALL = """set -e
python -m venv /tmp/v
PIP_CONFIG_FILE=/dev/null /tmp/v/bin/python -m pip install --quiet --no-cache-dir \
    --disable-pip-version-check --index-url http://127.0.0.1:8000/simple/ "glassllm[client]"
/tmp/v/bin/python -c "from glassllm.client import Sandbox
r = Sandbox('http://127.0.0.1:8000').op('mul', {'a': [1.0, 2.0], 'b': [3.0, 4.0]})
print(r.value.tolist(), r.grads['a'].tolist())"
"""


@check("pip install from /simple/ alone")
def simple_install(image: str) -> str:
    """The image's sandbox on a network that reaches nothing (``--network none``), and a
    second container of the same image in its network namespace (its loopback only):
    a fresh venv installs glassllm[client] from the sandbox's /simple/ index, whose
    wheels were fetched for this image's Python and platform when it was built, and the
    client runs an op."""
    cid = docker("run", "-d", *LOCKED_DOWN, "--network", "none", image)
    try:
        for _ in range(200):
            probe = subprocess.run([DOCKER, "exec", cid, "python", "-c",
                                    "import urllib.request; urllib.request.urlopen("
                                    "'http://127.0.0.1:8000/healthz', timeout=1)"],
                                   capture_output=True)
            if probe.returncode == 0:
                break
            time.sleep(0.1)
        out = docker("run", "--rm", "--network", f"container:{cid}", "--tmpfs",
                     "/tmp:exec", "--entrypoint", "sh", image, "-c", INSTALL, timeout=300)
    finally:
        remove(cid)
    if out.strip().splitlines()[-1] != "[3.0, 8.0] [3.0, 4.0]":
        raise Failed(f"the client's op answered {out[-500:]!r}")
    return "a fresh venv installed glassllm[client] from the sandbox alone; the op ran"


def main() -> None:
    global DOCKER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="glassllm:latest")
    parser.add_argument("--docker", default="docker")
    args = parser.parse_args()
    DOCKER = args.docker
    image = args.image
    print(f"== docker-test: {image}", flush=True)
    sizes(image)
    hardened(image)
    try:
        cid, url, took = start(image, "--cpus", "2")
    except Failed as exc:
        print(f"FAIL start: {exc}")
        sys.exit(1)
    verdict = "within" if took <= 2.0 else "OVER"
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"ok   cold start to a 200 /healthz: {took:.2f} s ({verdict} the 2 s target;"
          f" CPU used {cpu_seconds(cid)}, load average {load})", flush=True)
    try:
        assert httpx.get(f"{url}/readyz").status_code == 200
        op_call(url)
        expression(url)
        page_and_docs(url)
        metrics(url)
        healthcheck(cid)
        workers(cid, 2)
        stop(cid)
    finally:
        remove(cid)
    env_limit(image)
    env_refused(image)
    simple_install(image)
    if failures:
        print(f"== docker-test FAILED ({len(failures)}):\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(json.dumps({"docker_test": "passed", "image": image}))


if __name__ == "__main__":
    main()

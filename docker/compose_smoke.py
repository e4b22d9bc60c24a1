"""``make docker-test``'s course-deployment check: deploy/compose.yaml for real.

Brings the deployment up with the compose implementation Debian packages (``docker-compose``
v1, or the ``docker compose`` plugin where it exists), on a free port of 127.0.0.1 only,
sends a bounded number of requests through the nginx proxy, checks that every one is
answered and that more than one replica answered (nginx's ``X-Upstream`` header), that
the replicas run with the CPU and memory limits set, that students' attempts taken by
both replicas land once each in the one PostgreSQL (the class record), then brings it
down with its volume, whatever happened.

    python docker/compose_smoke.py --base glassllm-base:bookworm [--image glassllm:latest]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from glassllm_service.record.tokens import Keyring

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "deploy" / "compose.yaml"
PROJECT = "glassllm-smoke"
REPLICAS = 2
REQUESTS = 20
ATTEMPTS = 20


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    raise SystemExit("compose: neither docker-compose nor the docker compose plugin is"
                     " installed (apt-get install docker-compose)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the base the proxy image is built on")
    parser.add_argument("--image", default="glassllm:latest")
    args = parser.parse_args()
    port = free_port()
    secret = secrets.token_urlsafe(32)
    env = {**os.environ, "BASE": args.base, "GLASSLLM_IMAGE": args.image,
           "PORT": str(port), "REPLICAS": str(REPLICAS), "GLASSLLM_MODE": "course",
           "GLASSLLM_COURSE_SECRETS": f"smoke={secret}", "GLASSLLM_SHIPPED_EXERCISES": "1",
           "RECORD_PASSWORD": secrets.token_urlsafe(16)}
    keyring = Keyring("course", {"smoke": secret})
    student = {"Authorization": f"Bearer {keyring.issue('smoke-0', days=1)}"}
    compose = [*compose_command(), "-f", str(COMPOSE_FILE), "-p", PROJECT]

    def run(*cmd: str, timeout: float = 300) -> str:
        r = subprocess.run([*compose, *cmd], env=env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise SystemExit(f"compose {' '.join(cmd)} exited {r.returncode}:\n"
                             f"{r.stdout[-1500:]}{r.stderr[-1500:]}")
        return r.stdout

    t0 = time.perf_counter()
    try:
        run("up", "-d", "--build")
        url = f"http://127.0.0.1:{port}"
        deadline = time.perf_counter() + 60
        while True:                                   # the proxy waits for healthy replicas
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() > deadline:
                raise SystemExit(f"compose: no 200 /healthz through the proxy in 60 s\n"
                                 f"{run('ps')}{run('logs', '--tail', '20')}")
            time.sleep(0.25)
        print(f"ok   compose up: {REPLICAS} replicas + proxy answering after"
              f" {time.perf_counter() - t0:.1f} s", flush=True)
        answered: dict[str, int] = {}
        for _ in range(REQUESTS):
            # an op no shipped exercise hides (attention-scale hides softmax's numbers,
            # and with them every op that runs softmax)
            r = httpx.post(f"{url}/api/v1/ops/exp", headers=student,
                           json={"inputs": {"a": [[0.0, 0.0]]}}, timeout=10)
            assert r.status_code == 200 and r.json()["value"] == [[1.0, 1.0]], r.text[:200]
            upstream = r.headers.get("x-upstream")
            assert upstream, f"no X-Upstream header: {dict(r.headers)}"
            answered[upstream] = answered.get(upstream, 0) + 1
        if len(answered) < 2:
            raise SystemExit(f"compose: one replica answered all {REQUESTS} requests:"
                             f" {answered}")
        print(f"ok   {REQUESTS} op calls through nginx, answered by {len(answered)} replicas:"
              f" {sorted(answered.values())}", flush=True)
        ids = subprocess.run(["docker", "ps", "-q", "--filter",
                              f"label=com.docker.compose.project={PROJECT}", "--filter",
                              "label=com.docker.compose.service=sandbox"],
                             capture_output=True, text=True, check=True).stdout.split()
        assert len(ids) == REPLICAS, f"{len(ids)} sandbox containers, expected {REPLICAS}"
        for cid in ids:
            limits = subprocess.run(
                ["docker", "inspect", "-f", "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}"
                 " {{.HostConfig.ReadonlyRootfs}} {{.State.Health.Status}}", cid],
                capture_output=True, text=True, check=True).stdout.split()
            assert limits[0] != "0" and limits[1] != "0", f"{cid}: no CPU/memory limit"
            assert limits[2:] == ["true", "healthy"], f"{cid}: {limits}"
        print("ok   each replica: read-only, healthy, CPU and memory limits set", flush=True)
        record(url, keyring)
    finally:
        run("down", "--volumes", "--timeout", "5")
        print(f"ok   compose down; deployment test took {time.perf_counter() - t0:.1f} s",
              flush=True)


def record(url: str, keyring: Keyring) -> None:
    """Students submit through the proxy; both replicas record into the one PostgreSQL:
    the instructor's gradebook counts every attempt, whichever replica took it."""
    ex, students, per = "softmax-value", [f"smoke-{i}" for i in range(ATTEMPTS // 2)], 2
    upstreams: dict[str, int] = {}
    for sid in students:
        auth = {"Authorization": f"Bearer {keyring.issue(sid, days=1)}"}
        view = httpx.get(f"{url}/api/v1/exercises/{ex}", headers=auth, timeout=10)
        assert view.status_code == 200, view.text[:300]
        answers = {a["key"]: np.zeros(a["shape"]).tolist() for a in view.json()["answers"]}
        for n in range(per):
            r = httpx.post(f"{url}/api/v1/exercises/{ex}/submit", headers=auth, timeout=10,
                           json={"answers": answers, "idempotency_key": f"{sid}-{n}"})
            assert r.status_code == 200 and r.json()["attempt"]["recorded"], r.text[:300]
            upstreams[r.headers["x-upstream"]] = upstreams.get(r.headers["x-upstream"], 0) + 1
    if len(upstreams) < 2:
        raise SystemExit(f"compose: one replica recorded every attempt: {upstreams}")
    prof = {"Authorization": f"Bearer {keyring.issue('prof', 'instructor', days=1)}"}
    book = httpx.get(f"{url}/api/v1/record/gradebook.json", headers=prof, timeout=10).json()
    # a shipped example is a practice column (the course's own exercises are graded)
    counted = {s["student"]: {**s["exercises"], **s.get("practice", {})}.get(ex, {}).get(
        "attempts", 0) for s in book["students"]}
    assert all(counted.get(sid) == per for sid in students), counted
    print(f"ok   {per * len(students)} attempts through nginx, recorded by"
          f" {len(upstreams)} replicas {sorted(upstreams.values())} in the one PostgreSQL:"
          " the gradebook counts each once", flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""A check of a (64, 64) answer against a plain op call of the same size, side by side on
one real sandbox (uvicorn, loopback, one worker): the server's own time per request (the
access log's duration, from the first byte in to the last byte out) and the client's
round trip, medians of interleaved rounds.

    .venv/bin/python bench/exercise_check.py [--rounds 300]

Compared, all on (64, 64) float64 arrays:

- ``op``: ``POST /api/v1/ops/softmax`` with ``grad_output``: the value and the gradient;
- ``submit right`` / ``submit wrong``: ``POST /api/v1/exercises/{id}/submit`` of an
  exercise whose case is that softmax: the student's case rebuilt (seed, numbers,
  expected gradient), the answer graded per element to 4 digits (and, wrong, the pattern
  of the mistake found), the verdict with its per-element digits written;
- ``check digits``: ``POST /api/v1/check`` of the same op with ``"digits": 4``, and
  ``check rtol``, the same check by NumPy's allclose (what it was before digits).

The target: a check within 2x of the plain op call.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXERCISE = """
id = "softmax-64"
title = "A (64, 64) softmax's gradient"
text = "The gradient of softmax(a) along the last axis."
digits = 4
[case]
expression = "softmax(a)"
[case.variables.a]
shape = [64, 64]
distribution = "normal"
[answer]
kind = "grads"
grads = ["a"]
grad_output = { distribution = "normal" }
"""


def start(folder: Path, log: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GLASSLLM_EXERCISES_DIR": str(folder), "GLASSLLM_LOG_FORMAT": "json"}
    proc = subprocess.Popen([sys.executable, "-m", "glassllm_service.sandbox_cli", "--port",
                             str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the sandbox did not start")


def server_times(log: Path) -> dict[str, list[float]]:
    """Each request id's server duration (ms), from the JSON access log."""
    out: dict[str, list[float]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            rec = orjson.loads(line[start:])
        except orjson.JSONDecodeError:
            continue
        out.setdefault(rec.get("request_id", ""), []).append(rec["duration_ms"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    from glassllm.course import build_case, load

    folder = Path(tempfile.mkdtemp(prefix="glassllm-bench-ex-"))
    (folder / "softmax-64.toml").write_text(EXERCISE, encoding="utf-8")
    case = build_case(load(folder / "softmax-64.toml"), "ada")
    a, g, right = case.variables["a"], case.grad_output, case.expected["a"]
    bodies = {
        "op": ("/api/v1/ops/softmax", {"inputs": {"a": a.tolist()}, "grad_output": g.tolist()}),
        "submit right": ("/api/v1/exercises/softmax-64/submit?student=ada",
                         {"answers": {"a": right.tolist()}}),
        "submit wrong": ("/api/v1/exercises/softmax-64/submit?student=ada",
                         {"answers": {"a": (right * 64).tolist()}}),
        "check digits": ("/api/v1/check", {"op": "softmax", "inputs": {"a": a.tolist()},
                                           "grad_output": g.tolist(), "digits": 4,
                                           "claimed": {"grads": {"a": right.tolist()}}}),
        "check rtol": ("/api/v1/check", {"op": "softmax", "inputs": {"a": a.tolist()},
                                         "grad_output": g.tolist(),
                                         "claimed": {"grads": {"a": right.tolist()}}}),
    }
    encoded = {k: (path, orjson.dumps(body)) for k, (path, body) in bodies.items()}
    log = folder / "server.log"
    proc, url = start(folder, log)
    client_ms: dict[str, list[float]] = {k: [] for k in bodies}
    ids: dict[str, list[str]] = {k: [] for k in bodies}
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            for rnd in range(args.rounds + 20):              # 20 rounds of warm-up
                for name, (path, body) in encoded.items():
                    rid = f"{name.replace(' ', '-')}-{rnd}"
                    t = time.perf_counter()
                    r = http.post(path, content=body, headers={
                        "content-type": "application/json", "x-request-id": rid})
                    took = (time.perf_counter() - t) * 1000
                    assert r.status_code == 200, r.text[:300]
                    if rnd >= 20:
                        client_ms[name].append(took)
                        ids[name].append(rid)
            verdict = http.post(encoded["submit wrong"][0], content=encoded["submit wrong"][1],
                                headers={"content-type": "application/json"}).json()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    times = server_times(log)
    server = {k: [times[i][0] for i in ids[k] if i in times] for k in bodies}
    op_server, op_client = statistics.median(server["op"]), statistics.median(client_ms["op"])
    print(f"(64, 64) softmax: a plain op call against exercise checks, {args.rounds} interleaved"
          " rounds, one worker, loopback")
    print(f"{'request':<14} {'server ms':>10} {'x op':>6} {'round trip ms':>14} {'x op':>6}")
    for name in bodies:
        s_ms, c_ms = statistics.median(server[name]), statistics.median(client_ms[name])
        print(f"{name:<14} {s_ms:>10.2f} {s_ms / op_server:>6.2f} {c_ms:>14.2f}"
              f" {c_ms / op_client:>6.2f}")
    print("the wrong answer's pattern:", verdict["answers"]["a"]["pattern"]["says"])
    assert np.isfinite(op_server)


if __name__ == "__main__":
    main()

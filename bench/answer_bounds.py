"""Peak memory of the worst request of each kind against a real sandbox (one worker).

For each route that returns several arrays, the request that makes the largest answer the
limits admit (or used to admit): a single op at the result limit, a batch of such cases,
an expression at the graph limit, an expression whose composite ops are opened
(``expand``), a check, the attention maps of a model at the activation limit. For each:
the status, the answer's bytes, the server's CPU seconds and its peak RSS (VmHWM, reset
before each request through /proc/<pid>/clear_refs) above its RSS before the request.
Relate the peak to the 1.5 GiB per replica that docs/deploy.md advises (one compute slot
per 1-CPU replica: one such request at a time, plus the idle process).

    python bench/answer_bounds.py [--only batch] [--env GLASSLLM_MAX_ANSWER_ELEMENTS=...]

Figures only: nothing here asserts anything. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sandbox_server import free_port, wait_healthy  # noqa: E402

MiB = 1024 * 1024


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def requests() -> dict[str, tuple[str, dict]]:
    rng = np.random.default_rng(0)               # numbers of a real answer's length
    side = 2000                                  # (2000, 1) * (1, 2000): 4·10⁶ elements
    outer = {"a": rng.normal(size=(side, 1)).tolist(), "b": rng.normal(size=(1, side)).tolist()}
    op_case = {"op": "mul", "inputs": outer}
    n = 1400                                     # softmax(x * y): a 3.9·10⁶-element graph
    graph = {"expression": "softmax(x * y).sum()",
             "variables": {"x": rng.normal(size=(n, 1)).tolist(),
                           "y": rng.normal(size=(1, n)).tolist()}}
    near = side - 2                              # a * b: 3 996 004 + both inputs < 4·10⁶
    big_output = {"expression": "a * b", "variables": {
        "a": rng.normal(size=(near, 1)).tolist(), "b": rng.normal(size=(1, near)).tolist()}}
    rows = 400_000                               # four rms_norm nodes of 4·10⁵, opened
    expand = {"expression": " + ".join(["rms_norm(x, w)"] * 4), "expand": True,
              "variables": {"x": np.round(rng.normal(size=(rows, 1)), 2).tolist(), "w": [1.0]}}
    opened_one = {"expression": "rms_norm(x, w)", "expand": True, "variables": {
        "x": np.round(rng.normal(size=(250_000, 1)), 2).tolist(), "w": [1.0]}}
    check = {**op_case, "claimed": {"grads": {"a": outer["a"], "b": outer["b"]}}}
    attention = {"prompt": "x" * 512, "seed": 0,
                 "model": {"d_model": 112, "n_layers": 1, "n_heads": 14, "n_kv_heads": 14,
                           "ffn_hidden": 64, "max_seq_len": 512}}
    return {
        "op (4M output)": ("/api/v1/ops/mul", {"inputs": outer}),
        "batch 64 x 4M": ("/api/v1/batch", {"cases": [op_case] * 64}),
        "batch 64 x 4M base64": ("/api/v1/batch", {"cases": [op_case] * 64,
                                                   "encoding": "base64"}),
        "batch 2 x 4M": ("/api/v1/batch", {"cases": [op_case] * 2}),
        "batch 2 x 4M base64": ("/api/v1/batch", {"cases": [op_case] * 2,
                                                  "encoding": "base64"}),
        "eval at the graph limit": ("/api/v1/eval", graph),
        "eval, a 4M output": ("/api/v1/eval", big_output),
        "eval, 4 rms_norm opened": ("/api/v1/eval", expand),
        "eval, 1 rms_norm opened": ("/api/v1/eval", opened_one),
        "check of a 4M case": ("/api/v1/check", check),
        "model/attention 14 x 512²": ("/api/v1/model/attention", attention),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a request whose name contains this")
    parser.add_argument("--env", action="append", default=[], help="NAME=value for the server")
    args = parser.parse_args()
    env = {**os.environ, "GLASSLLM_ACCESS_LOG": "0",
           **dict(item.split("=", 1) for item in args.env)}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "glassllm_service.sandbox_cli",
                             "--port", str(port),
                             "--log-level", "warning"], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        print(f"{'request':28s} {'status':>6s} {'answer MB':>10s} {'CPU s':>7s}"
              f" {'RSS before':>11s} {'peak':>8s} {'peak - before':>14s}")
        with httpx.Client(timeout=600) as client:
            for name, (path, body) in requests().items():
                if args.only and not any(o in name for o in args.only):
                    continue
                time.sleep(3)                     # the idle trim (glassllm_service/memory.py)
                Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # reset VmHWM
                before, cpu0 = _status(proc.pid)["VmRSS"], _cpu(proc.pid)
                r = client.post(url + path, json=body)
                peak, cpu = _status(proc.pid)["VmHWM"], _cpu(proc.pid) - cpu0
                print(f"{name:28s} {r.status_code:6d} {len(r.content) / 1e6:10.1f} {cpu:7.1f}"
                      f" {before / MiB:9.0f}Mi {peak / MiB:6.0f}Mi {(peak - before) / MiB:12.0f}Mi"
                      + (f"  {r.json()['error']['message'][:90]}" if r.status_code >= 400
                         else ""))
                del r
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()

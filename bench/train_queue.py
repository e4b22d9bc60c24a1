"""A class trains at once: N students (default 60) start the default training run within a
second against one sandbox with default settings (its training queue: runs at once = the
CPUs / workers, the rest wait). Measured against a real sandbox (uvicorn, loopback):

1. total time, first request → last ``done``, against the sum of the runs' single-run CPU
   times divided by the cores (target ≤ 1.2×: the queue keeps every core busy and adds
   little of its own);
2. a (4, 8) softmax request's p99 idle, then while the queue drains (target ≤ 2× idle);
3. each run's first estimate (the ``queued`` event's ``wait_s``) against the wait it
   really had, and `planned_seconds` against the single run's CPU time (the estimate's
   model, glassllm_service/training_queue.py).

    .venv/bin/python bench/train_queue.py [--runs 60] [--requests 2000]

Prints figures; asserts nothing (timing belongs here, never in tests).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_latency import ROOT, pct, softmax_latencies, start

ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def single_run_cpu(steps: int, tries: int) -> list[float]:
    """CPU seconds (user + system) of the default run as its own process, one BLAS thread,
    as the sandbox's training child runs it (the interpreter's start included)."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(tries):
            child = subprocess.Popen(
                [sys.executable, "-m", "glassllm.apps.cli", "train", "--steps", str(steps),
                 "--out", f"{tmp}/m.npz"], cwd=ROOT, env={**os.environ, **ONE_THREAD},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            if status != 0:
                raise SystemExit("glassllm train failed")
            out.append(usage.ru_utime + usage.ru_stime)
    return out


def student(url: str, i: int, steps: int, t0: float, record: dict) -> None:
    name = None
    with httpx.stream("POST", f"{url}/api/v1/train", json={"steps": steps}, timeout=3600,
                      headers={"X-Client-ID": f"bench-{i}"}) as r:
        record["status"] = r.status_code
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:") and name in ("queued", "start", "done", "error"):
                event = json.loads(line[5:])
                record[name] = time.perf_counter() - t0
                if name == "queued":
                    record["estimate"] = event["wait_s"]
                    record["position"] = event["position"]
                if name == "error":
                    record["message"] = event["message"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    cpu = single_run_cpu(args.steps, 3)
    proc, url = start()
    try:
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        slots = next(int(float(line.split()[1])) for line in metrics.splitlines()
                     if line.startswith("glassllm_training_slots "))
        with httpx.Client(base_url=url, timeout=60) as client:
            softmax_latencies(client, 50)  # warm up
            idle = softmax_latencies(client, args.requests // 2)
            records = [{} for _ in range(args.runs)]
            t0 = time.perf_counter()
            threads = [threading.Thread(target=student, args=(url, i, args.steps, t0, rec))
                       for i, rec in enumerate(records)]
            for t in threads:
                t.start()
                time.sleep(1.0 / args.runs)          # all within a second
            busy = softmax_latencies(client, args.requests,
                                     until=lambda: all("done" in r or "error" in r
                                                       for r in records))
            for t in threads:
                t.join()
            total = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    refused = [r for r in records if r.get("status") != 200 or "done" not in r]
    from glassllm_service.training_queue import planned_seconds
    planned = planned_seconds({"max_seq_len": 64, "d_model": 64, "n_layers": 2}, args.steps,
                              8, 25, 131_392)
    cores = os.cpu_count() or 1
    one = float(np.mean(cpu))
    ideal = args.runs * one / min(cores, slots)
    print(f"single default run ({args.steps} steps), one BLAS thread: CPU "
          f"{', '.join(f'{c:.2f}' for c in cpu)} s (mean {one:.2f} s); planned_seconds "
          f"{planned:.2f} s")
    print(f"{args.runs} queued runs, {slots} at once on {cores} cores: total {total:.1f} s "
          f"against {args.runs} x {one:.2f} s / {min(cores, slots)} = {ideal:.1f} s "
          f"(ratio {total / ideal:.2f}x, target <= 1.2x); not done: {len(refused)}")
    print(f"softmax (4, 8), {len(idle)} requests idle:       p50 {pct(idle, 50):6.2f} ms  "
          f"p99 {pct(idle, 99):6.2f} ms")
    print(f"softmax (4, 8), {len(busy)} requests while the queue drains: p50 "
          f"{pct(busy, 50):6.2f} ms  p99 {pct(busy, 99):6.2f} ms  (p99 ratio "
          f"{pct(busy, 99) / pct(idle, 99):.2f}x, target <= 2x)")
    waited = [(r["estimate"], r["start"] - r["queued"]) for r in records
              if "start" in r and r.get("position", 0) > 0]
    if waited:
        err = np.array([est - real for est, real in waited])
        real = np.array([real for _, real in waited])
        print(f"first estimate against the real wait over {len(waited)} waiting runs: "
              f"median error {np.median(err):+.1f} s, p90 |error| "
              f"{np.percentile(np.abs(err), 90):.1f} s, longest wait {real.max():.1f} s")
    print(f"machine: {cores} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

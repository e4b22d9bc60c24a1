"""What the dead-gradient report costs beside the evaluation it explains, side by side in
one process: the medians of interleaved rounds of ``evaluate`` with and without
``dead=True`` on a (64, 64) attention head with a causal mask (its masked half of the
scores dies, for the report to explain), and of the library's `dead_gradients` beside one
``backward`` of the same graph.

    .venv/bin/python bench/dead_gradients.py [--rounds 50]

The report is a second walk of the graph plus one backward per reason per edge that
kills something, so it should cost a few backwards, not a finite-difference check.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from glassllm import autograd as A
from glassllm.gradients.dead import dead_gradients
from glassllm.sandbox.expr import evaluate
from glassllm.tensor import Tensor

N = 64
EXPRESSION = "(softmax(masked_fill(q @ k.T * 0.125, m, -inf)) @ v).sum()"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=50)
    rounds = ap.parse_args().rounds
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((N, N)) for _ in range(3))
    mask = np.triu(np.ones((N, N), dtype=bool), 1)
    variables = {"q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "m": mask.tolist()}

    def lib_graph():
        tq, tk, tv = (Tensor(a, requires_grad=True) for a in (q, k, v))
        s = A.mul(A.matmul(tq, A.transpose(tk)), 0.125)
        out = A.tsum(A.matmul(A.softmax(A.masked_fill(s, mask, -np.inf)), tv))
        return out, {"q": tq, "k": tk, "v": tv}

    times: dict[str, list[float]] = {k: [] for k in ("eval", "eval+dead", "backward",
                                                      "dead_gradients")}
    for _ in range(rounds):
        t = time.perf_counter()
        evaluate(EXPRESSION, variables)
        times["eval"].append(time.perf_counter() - t)
        t = time.perf_counter()
        evaluate(EXPRESSION, variables, dead=True)
        times["eval+dead"].append(time.perf_counter() - t)
        out, leaves = lib_graph()
        t = time.perf_counter()
        out.backward()
        times["backward"].append(time.perf_counter() - t)
        out, leaves = lib_graph()
        t = time.perf_counter()
        dead_gradients(out, leaves)
        times["dead_gradients"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:16s} {v:8.2f} ms")
    print(f"eval with dead / without: {med['eval+dead'] / med['eval']:.2f}x")
    print(f"dead_gradients / one backward: {med['dead_gradients'] / med['backward']:.2f}x")


if __name__ == "__main__":
    main()

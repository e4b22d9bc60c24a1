"""The notebook picture of a 40-node graph with heatmaps (glassllm.display): the time to
build its HTML and its size.

    .venv/bin/python bench/display.py [--rounds 50]

The graph: a two-layer MLP on a batch of 4, a softmax cross-entropy at the end, built
from glassllm's ops with every weight and activation an array (each node draws two
heatmaps, data and grad) — 40 nodes. Targets: at most 50 ms to build, at most 200 KB.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from glassllm import Tensor, display
from glassllm import autograd as A


def forty_nodes(seed: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
    """A graph of exactly 40 nodes, after backward; its leaves by name."""
    rng = np.random.default_rng(seed)
    p = {name: Tensor(rng.normal(size=shape) * 0.5, requires_grad=True) for name, shape in (
        ("x", (4, 6)), ("w1", (6, 8)), ("b1", (8,)), ("w2", (8, 8)), ("b2", (8,)),
        ("w3", (8, 5)), ("b3", (5,)))}
    targets = np.array([0, 3, 1, 4])
    h = A.tanh(p["x"] @ p["w1"] + p["b1"])
    h2 = A.relu(h @ p["w2"] + p["b2"])
    g = A.sigmoid(h2) * h2 + h2 * 0.5                            # a gate and a skip
    logits = g @ p["w3"] + p["b3"]
    z = logits - A.max(logits, axis=-1, keepdims=True)
    logp = z - A.log(A.exp(z).sum(axis=-1, keepdims=True))
    picked = logp[np.arange(4), targets].reshape(2, 2)
    loss = -(picked.mean())
    reg = (p["w1"] ** 2).sum() * 1e-3 + (p["w2"] ** 2).sum() * 1e-3
    total = loss + reg
    total.backward()
    return total, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    root, names = forty_nodes()
    nodes = display.tensor_nodes(root, names)
    times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        html = display.tensor_bundle(root, names)["text/html"]
        times.append(time.perf_counter() - t0)
    size = len(html.encode())
    print(f"nodes: {len(nodes)}")
    print(f"build: median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms"
          f" over {args.rounds} rounds (target <= 50 ms)")
    print(f"size: {size / 1024:.1f} KB (target <= 200 KB)")


if __name__ == "__main__":
    main()

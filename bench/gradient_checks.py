"""Benchmark: the checks that do not hinge on eps against one full finite-difference check.

The case: one causal attention head of (64, 64) queries, keys and values,
softmax(masked_fill(q @ kᵀ / 8, future, -inf)) @ v, every input checked (12 288 elements);
with ``--layer``, `glassllm.layers.attention` of x (1, 64, 64), 4 query heads and 2 K/V
heads (x and the four weights: 16 384 elements). Each check runs once, timed in CPU time
of this process, side by side (the cheap ones the best of 5 runs):

  gradcheck      central differences per element: 2 forward passes each
  taylor_test    12 steps: 13 forward passes and one backward
  adjoint_test   2 forward passes and one backward
  eps_sweep      23 eps: 46 forward passes and one backward

and prints each one's cost as a fraction of gradcheck's. The target: the Taylor and the
adjoint test together at most 1/50 of one full finite-difference check. Figures only, no
assertion (docs/performance.md keeps the latest).

    python bench/gradient_checks.py [--layer]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from glassllm import Tensor, layers
from glassllm import autograd as ag
from glassllm.gradients import adjoint_test, eps_sweep, gradcheck, taylor_test


def head_case(rng: np.random.Generator):
    future = np.triu(np.ones((64, 64), dtype=bool), k=1)

    def fn(q, k, v):
        scores = ag.matmul(q, ag.transpose(k)) / 8.0                    # (64, 64)
        return ag.matmul(ag.softmax(ag.masked_fill(scores, future, -np.inf)), v)

    return fn, [Tensor(rng.normal(size=(64, 64)), requires_grad=True) for _ in range(3)]


def layer_case(rng: np.random.Generator):
    cos, sin = layers.rope_angles(64, 16)

    def fn(x, wq, wk, wv, wo):
        return layers.attention(x, wq, wk, wv, wo, 4, 2, cos, sin)

    shapes = [(1, 64, 64), (64, 64), (64, 32), (64, 32), (64, 64)]
    return fn, [Tensor(rng.normal(size=s) * 0.3, requires_grad=True) for s in shapes]


def cpu(run, repeats: int) -> tuple[float, object]:
    """The least CPU time of `repeats` runs, and the last run's result."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        out = run()
        best = min(best, time.process_time() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", action="store_true", help="the attention layer, not a head")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    fn, inputs = layer_case(rng) if args.layer else head_case(rng)
    seed = rng.normal(size=fn(*inputs).shape)
    elements = sum(t.data.size for t in inputs)
    print(f"case: {'attention layer' if args.layer else 'attention head'}, {elements} elements"
          " checked")
    times = {}
    for name, run in [("taylor_test", lambda: taylor_test(fn, *inputs, grad_output=seed)),
                      ("adjoint_test", lambda: adjoint_test(fn, *inputs, grad_output=seed)),
                      ("eps_sweep", lambda: eps_sweep(fn, *inputs, grad_output=seed)),
                      ("gradcheck", lambda: gradcheck(fn, *inputs, grad_output=seed))]:
        times[name], result = cpu(run, 1 if name == "gradcheck" else 5)
        verdict = getattr(result, "passed", None)
        print(f"  {name:13s} {times[name]:9.3f} s CPU  passed={verdict}")
    full = times["gradcheck"]
    for name in ("taylor_test", "adjoint_test", "eps_sweep"):
        print(f"  {name:13s} = 1/{full / times[name]:,.0f} of gradcheck")
    both = times["taylor_test"] + times["adjoint_test"]
    print(f"  taylor + adjoint = 1/{full / both:,.0f} of gradcheck (target: at most 1/50)")


if __name__ == "__main__":
    main()

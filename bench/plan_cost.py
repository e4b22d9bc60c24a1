"""Planned cost against measured cost for every op of the registry, at the default limits.

For each op, the inputs a user could pick to make it cost the most for its plan, sized
near GLASSLLM_MAX_RESULT_ELEMENTS / GLASSLLM_MAX_MATMUL_MADDS (tests/plan_cost.py), run
through `prepare_args` and `run` with one BLAS thread; printed: the plan (elements,
multiply-adds), the CPU time, the time ratio (measured over the plan priced at the median
unary op's rate per element and a square matmul's per multiply-add), NumPy's peak
allocation (tracemalloc) and its ratio to the planned bytes. tests/library/test_plan_cost.py
bounds the memory ratio at small limits; the time ratio's target is here, since a busy
machine moves it: at most 50x the plan (at the small limits, 2026-12: the highest was
gelu's ~21, erf per element, then reductions over 16 axes ~18; the loops that grew with a
count the user picks stood at 130-400).

    python bench/plan_cost.py [--op repeat_kv] [--repeats 3] [--small]

Figures only: nothing here asserts a time; the last line says whether the target held.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glassllm.sandbox.limits import Limits
from tests.plan_cost import measure_all, small_limits

TIME_RATIO = 50.0            # the CPU time of an op's costliest case over its plan, at most


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", help="only this op (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true",
                        help="the suite's small limits (every case in milliseconds)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    rates, results = measure_all(small_limits() if args.small else Limits(), args.repeats,
                                 only=lambda case: not args.op or case.op in args.op)
    print(f"rates: {rates.per_element * 1e9:.2f} ns per element, "
          f"{rates.per_madd * 1e12:.2f} ps per multiply-add, {rates.per_call * 1e6:.1f} µs"
          " per call")
    print(f"{'op':18s} {'case':40s} {'elements':>10s} {'madds':>12s} {'CPU ms':>9s}"
          f" {'x plan':>7s} {'peak MB':>8s} {'x plan':>7s}")
    for m in sorted(results, key=lambda m: -m.time_ratio):
        print(f"{m.case.op:18s} {m.case.title[:40]:40s} {m.elements:10d} {m.madds:12d}"
              f" {m.seconds * 1e3:9.2f} {m.time_ratio:7.1f} {m.peak_bytes / 1e6:8.1f}"
              f" {m.memory_ratio:7.2f}")
    print(f"max time ratio {max(m.time_ratio for m in results):.1f}, max memory ratio"
          f" {max(m.memory_ratio for m in results):.2f}; {time.perf_counter() - t0:.0f} s")
    over = [f"{m.case.op} ({m.case.title}) {m.time_ratio:.1f}x" for m in results
            if m.time_ratio > TIME_RATIO]
    print(f"time target (<= {TIME_RATIO:g}x the plan): "
          + ("met" if not over else "over: " + "; ".join(over)))


if __name__ == "__main__":
    main()

"""Benchmark: the erf behind the exact gelu. Figures only, no assertion.

Compares, per element on 10^6 float64 values:
  math.erf through np.frompyfunc   (what glassllm.autograd uses: stdlib, no new dependency)
  np.vectorize(math.erf)           (the obvious vectorisation)
  scipy.special.erf                (only when SciPy is importable; never required)
and prints the largest difference from SciPy's erf when it is there.

    python bench/erf.py
"""

from __future__ import annotations

import math
import time

import numpy as np

from glassllm.autograd import _erf_data

x = np.random.default_rng(0).normal(scale=3.0, size=1_000_000)


def per_element_ns(fn) -> float:
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best / x.size * 1e9


print(f"math.erf via np.frompyfunc : {per_element_ns(_erf_data):6.1f} ns/element")
print(f"np.vectorize(math.erf)     : {per_element_ns(np.vectorize(math.erf)):6.1f} ns/element")
try:
    from scipy.special import erf
except ImportError:
    print("scipy.special.erf          : SciPy not installed")
else:
    print(f"scipy.special.erf          : {per_element_ns(erf):6.1f} ns/element")
    print(f"max |difference|           : {np.max(np.abs(_erf_data(x) - erf(x))):.3g}")

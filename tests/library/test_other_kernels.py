"""The suite's float comparisons hold on another CPU's kernels (docs/testing.md, "Exact and
rounded").

OpenBLAS as NumPy's wheels ship it is a DYNAMIC_ARCH build: it picks its GEMM kernel by
CPU, and a kernel with fused multiply-adds or another blocking sums a product in another
order. NumPy likewise picks its SIMD loops (exp, log, sums) by CPU. A test that asserts
bit-identical results of two code paths that are not the same operations on the same
layouts passes on the machine it was written on and fails on another (it did: on an AMD
EPYC, the fused and the composed attention layer differed in the last bit).

This runs the test files that compare two code paths again in a subprocess with
OpenBLAS forced to its oldest x86-64 kernel (Prescott: SSE3, no FMA) and NumPy's
dispatched SIMD loops turned off (its baseline only): the other end from the AVX-512 and
FMA kernels a current CPU gets.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from rounding import assert_rounding_close, rounding_bound
from sandbox_server import ROOT

FILES = ["tests/library/test_fused.py", "tests/library/test_layers.py",
         "tests/library/test_model.py", "tests/library/test_numerics.py",
         "tests/library/test_docstrings.py"]


def _openblas_dynamic_arch() -> bool:
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    return blas.get("name", "").endswith("openblas") and \
        "DYNAMIC_ARCH" in blas.get("openblas configuration", "")


def _dispatched_features() -> list[str]:
    """NumPy's dispatched CPU features that this CPU has (the ones that may be turned off)."""
    from numpy._core import _multiarray_umath as umath

    return [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]


def _kernel(env: dict[str, str]) -> str:
    """The core OpenBLAS reports loading ("Core: …") under this environment."""
    probe = subprocess.run([sys.executable, "-c", "import numpy"], capture_output=True,
                           text=True, env={**env, "OPENBLAS_VERBOSE": "2"}, timeout=60)
    return next((line for line in probe.stderr.splitlines() if line.startswith("Core:")), "")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="OPENBLAS_CORETYPE=Prescott is an x86-64 kernel")
@pytest.mark.skipif(not _openblas_dynamic_arch(),
                    reason="NumPy's BLAS is not a DYNAMIC_ARCH OpenBLAS")
def test_code_path_comparisons_hold_with_the_oldest_blas_kernel_and_no_simd():
    env = {**os.environ, "OPENBLAS_CORETYPE": "Prescott",
           "NPY_DISABLE_CPU_FEATURES": ",".join(_dispatched_features())}
    default = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    forced = _kernel(env)  # OpenBLAS names it "Katmai": its generic SSE kernel
    assert forced and forced != _kernel(default), (forced, "the kernel was not forced")
    # the model training tests and the gradient checkers compare with nothing but
    # themselves (and take a minute on this kernel)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FILES,
         "-k", "not training and not gradcheck"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_the_rounding_bound_admits_a_reordered_sum_and_nothing_more():
    """tests/rounding.py: p·1 + p·3 + p·5 with p = fl(1/3), summed as one kernel does and
    as another does with a fused multiply-add, is within the bound; an error of 1e-12, a
    NaN or an infinity elsewhere is not."""
    third = 1.0 / 3.0
    plain = (third * 1 + third * 3) + third * 5
    fused = float(Fraction(third * 1 + third * 5) + 3 * Fraction(third))  # fma(p, 3, ·)
    assert (plain, fused) == (3.0, 3.0 - 2.0**-51)  # the kernel shows in the last bit
    assert_rounding_close(fused, plain, n=6, scale=9 * third)
    assert rounding_bound(6, 3.0) < 1e-14
    for got, want in [(3.0 + 1e-12, 3.0), (np.nan, 3.0), (np.inf, 1e308), (-np.inf, np.inf)]:
        with pytest.raises(AssertionError):
            assert_rounding_close(got, want, n=6, scale=9 * third)

"""How far apart two float64 computations of the same math may land: the tolerance of a
test that compares two different code paths (docs/testing.md, "Exact and rounded").

Two code paths that compute the same sums in another order — another BLAS kernel
(OpenBLAS picks its GEMM kernel by CPU, with or without fused multiply-adds), a product
of other shapes (stacked heads, blocks of rows), einsum against a product and a sum —
agree only up to rounding. The bound used here is the standard one (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., §2.2 and §3.1, Lemma 3.1 and (3.5)):

    every basic operation rounds with |fl(x) − x| ≤ u·|x|, u = 2⁻⁵³ (float64's unit
    roundoff); a sum of n terms, or a dot product of length n, computed in any order,
    with or without fused multiply-adds, is within γ_n·Σ|terms| of the exact value,
    γ_n = n·u / (1 − n·u).

Below the smallest normal number (2⁻¹⁰²²) a rounding's error is absolute instead, at
most half the subnormal step 2⁻¹⁰⁷⁴ (Higham (2.8)): each of the n roundings adds up to
one such step. (An error made there and then multiplied by a large factor can exceed
this; tests that draw arbitrary values keep their magnitudes at 0 or above 1e-100, so
that no product of a few of them underflows.)

Two evaluations that each obey this differ by at most 2·(γ_n·Σ|terms| + n·2⁻¹⁰⁷⁴). For
a chain of steps, n counts the roundings on the longest path to an entry (the reduction
lengths along it, plus one per elementwise step; a library function such as exp counts
two) and Σ|terms| becomes `scale`: a bound on the magnitude of what the last step sums,
times how much the later steps amplify an earlier error (to first order). Each test says
how it gets its n and scale.
"""

from __future__ import annotations

import numpy as np

U = 2.0**-53  # float64's unit roundoff: half the gap between 1.0 and the next float
SUBNORMAL_STEP = 2.0**-1074  # the gap between float64's subnormal numbers


def gamma(n: int) -> float:
    """γ_n = n·u / (1 − n·u): the relative error of n roundings in a row (1 ≤ n, n·u < 1)."""
    if not 1 <= n < 1 / U:
        raise ValueError(f"n = {n} roundings: 1 ≤ n and n·u < 1")
    return n * U / (1 - n * U)


def rounding_bound(n: int, scale) -> np.ndarray:
    """2·(γ_n·scale + n·2⁻¹⁰⁷⁴): the most two float64 evaluations of the same
    n-rounding computation whose terms are bounded by ``scale`` (a number or an array)
    can differ."""
    return 2.0 * (gamma(n) * np.asarray(scale, dtype=np.float64) + n * SUBNORMAL_STEP)


def assert_rounding_close(got, want, *, n: int, scale, err_msg: str = "") -> None:
    """Assert |got − want| ≤ 2·(γ_n·scale + n·2⁻¹⁰⁷⁴) elementwise, with NaNs and infinities at the
    same places (equal infinities): `got` and `want` are two evaluations of the same
    math that may sum in another order. ``scale`` is a number or an array that
    broadcasts to ``want``'s shape."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape, err_msg)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaNs {err_msg}")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"infinities {err_msg}")
    finite = np.isfinite(want)
    bound = np.broadcast_to(rounding_bound(n, scale), want.shape)[finite]
    diff = np.abs(got[finite] - want[finite])
    worst = float(np.max(diff / bound, initial=0.0))  # bound > 0: n ≥ 1
    assert np.all(diff <= bound), (
        f"{err_msg}: differs by up to {worst:.3g} times the rounding bound "
        f"2·(γ_{n}·scale + {n}·2⁻¹⁰⁷⁴) (largest difference {float(np.max(diff)):.3g})")


"""Gradient checks: is a backward rule right? Four answers, each from its own angle.

For a function `fn` of some Tensors and a seed `u` (grad_output, shaped like the output),
the scalar L(x) = sum(fn(x) * u) has dL/dx equal to the vector-Jacobian product that
`backward(u)` computes. Each check holds that product against L itself:

- `gradcheck`: central differences per element, (L(x + eps e_i) - L(x - eps e_i)) / 2eps,
  compared elementwise. The classic check; its verdict hinges on eps (2 forward passes per
  element).
- `taylor_test`: the remainder r(h) = |L(x + h d) - L(x) - h <dL/dx, d>| of the
  first-order prediction in a random direction d shrinks as h² for a right rule of a
  smooth function, as h for a wrong one. It reports the observed order (the slope of
  log r against log h) instead of comparing against a tolerance; a function that is
  linear along d has only round-off for a remainder, and says so. No eps to choose.
- `adjoint_test`: the dot-product test. <u, J v>, with J v by central differences in
  one random direction v, against <J^T u, v> from backward: two forward passes and one
  backward, whatever the size of x.
- `eps_sweep`: the directional central difference at eps from 1e-1 to 1e-12: its error
  falls as eps² while truncation dominates, then rises as 1/eps when rounding does; the
  best eps is where they meet (about the cube root of the unit roundoff).

``float32=True`` emulates a float32 framework: fn's inputs and outputs (and the seed) are
rounded to float32 and the engine stays float64, so a student sees why float32 checks
need another eps (`gradcheck` at eps=1e-6 fails right rules) while the Taylor and adjoint
tests still tell a wrong rule from rounding.

The caller's tensors and their `.grad` are never touched. Used by the test-suite on every
op, by the service's ``"check"``, and by students on ops they write themselves (STYLE
example 7). The Taylor test as in dolfin-adjoint's ``taylor_test`` (Farrell et al. 2013);
the adjoint test as JAX's ``check_grads`` (``check_vjp``) and Claerbout's dot-product test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.tensor import Tensor, no_grad

__all__ = ["AdjointResult", "EpsSweep", "GradcheckResult", "InputCheck", "TaylorResult",
           "adjoint_test", "eps_sweep", "gradcheck", "taylor_test", "unit_roundoff"]

# Every step of the Taylor test halves h: r(h) / r(h/2) is 4 for order 2, 2 for order 1.
# Emulated float32 starts higher: its round-off hides the remainders of small steps.
TAYLOR_H0 = 2.0 ** -5
TAYLOR_H0_FLOAT32 = 2.0 ** -2
TAYLOR_STEPS = 12
# The eps of the sweep: 1e-1 down to 1e-12, two per decade.
SWEEP_EPS = 10.0 ** -np.arange(1.0, 12.01, 0.5)
# The round-off of one float64 value of L, in unit roundoffs of its scale (_Objective.along).
ROUNDOFF_UNITS = 64.0
# A remainder counts for the order only above this many times its round-off level (a
# worst-case bound: the noise is seldom a tenth of it).
ABOVE_ROUNDOFF = 4.0


def unit_roundoff(float32: bool = False) -> float:
    """Half the spacing of the floating-point numbers at 1: 2**-53 (float64), 2**-24 (float32)."""
    return 2.0 ** -24 if float32 else 2.0 ** -53


def _round(a: np.ndarray, float32: bool) -> np.ndarray:
    """`a` rounded to float32 and back to float64 when emulating float32; else `a`."""
    if not float32:
        return a
    with np.errstate(over="ignore"):                  # beyond float32's range: ±inf, as in float32
        return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


class _Objective:
    """L(x) = sum(fn(x) * u) for one function, its checked inputs and its seed.

    Made once per check: copies of the checked inputs (the caller's are never touched),
    one forward and one backward at x for the analytic gradient (`grads`), and `__call__`
    evaluating L at any point, under no_grad, with the rounding of the float32 emulation.
    """

    def __init__(self, name: str, fn: Callable[..., Tensor], inputs: tuple, grad_output: Any,
                 float32: bool, random_seed: Any = None) -> None:
        self.fn, self.float32 = fn, float32
        self.checked = [i for i, x in enumerate(inputs)
                        if isinstance(x, Tensor) and x.requires_grad]
        if not self.checked:
            raise ValueError(f"{name}: no input requires grad; pass Tensor(...,"
                             " requires_grad=True)")
        self.args = [Tensor(_round(x.data, float32), requires_grad=True) if i in self.checked
                     else x for i, x in enumerate(inputs)]
        self.x = [self.args[i].data for i in self.checked]           # the point, as rounded
        self._at = list(self.x)                  # the arrays the inputs hold now (`__call__`)
        out = fn(*self.args)
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}: fn must return a Tensor, got {type(out).__name__}")
        if grad_output is None and random_seed is not None:     # the adjoint test's random u
            grad_output = random_seed.standard_normal(out.shape)
        seed = np.ones_like(out.data) if grad_output is None else np.asarray(grad_output,
                                                                             np.float64)
        if seed.shape != out.shape:
            raise ValueError(f"{name}: grad_output has shape {seed.shape}, the output has shape"
                             f" {out.shape}")
        self.seed = _round(seed, float32)
        if out.requires_grad:
            out.backward(self.seed)
        self.grads = [self.args[i].grad if self.args[i].grad is not None
                      else np.zeros_like(self.args[i].data) for i in self.checked]
        self.out = _round(out.data, float32)
        # The round-off of one value of L (`along`), in unit roundoffs. Emulated float32
        # rounds each input and output once, independently, and that dominates: their
        # root-sum-square (about 2 standard deviations of the sum of those errors). In
        # float64 the rounding inside fn (a chain of ops, a pairwise sum) is all there is
        # and has no such model: 64 times the sum of the terms' sizes.
        self.units = 1.0 if float32 else ROUNDOFF_UNITS
        self.out_rss = self.out_abs = 0.0

    def __call__(self, point: list[np.ndarray]) -> float:
        """L at `point` (one array per checked input). The inputs are this check's own
        copies, so each is set only when its array changed (gradcheck moves one at a time).
        Keeps the sizes of the terms L sums (`along`'s round-off)."""
        for k, (i, value) in enumerate(zip(self.checked, point, strict=True)):
            if value is not self._at[k]:
                self.args[i].data = _round(value, self.float32)
                self._at[k] = value
        with no_grad():
            out = _round(self.fn(*self.args).data, self.float32) * self.seed
        self.out_abs = float(np.sum(np.abs(out)))
        self.out_rss = float(np.sqrt(np.sum(out * out)))
        return float(np.sum(out))

    def along(self, direction: list[np.ndarray], h: float) -> tuple[float, float]:
        """L(x + h d), and the round-off level of that value: from the terms L sums, fn(x +
        h d) * u, and dL/dx * (x + h d), what rounding the input moves L by (an
        ill-conditioned fn rounds at the scale of its inputs too); in float32 their
        root-sum-square, in float64 `units` times the sum of their sizes, in unit
        roundoffs. NumPy's warnings at a moved point (log of a negative, an overflow) are
        not the caller's: silenced."""
        point = [x + h * d for x, d in zip(self.x, direction, strict=True)]
        with np.errstate(all="ignore"):
            value = self(point)
            moved = [g * p for g, p in zip(self.grads, point, strict=True)]
            if self.float32:
                size = float(np.sqrt(self.out_rss ** 2 + sum(np.sum(m * m) for m in moved)))
            else:
                size = self.units * (self.out_abs + sum(float(np.sum(np.abs(m))) for m in moved))
        return value, unit_roundoff(self.float32) * size

    def slope(self, direction: list[np.ndarray]) -> float:
        """<dL/dx, d>: the first-order change of L along d, from backward."""
        return float(sum(np.sum(g * d) for g, d in zip(self.grads, direction, strict=True)))

    def direction(self, rng: np.random.Generator, given: Any) -> list[np.ndarray]:
        """The checked inputs' direction: `given` (one array per checked input, or one array
        when one input is checked), else standard normal."""
        if given is None:
            return [rng.standard_normal(x.shape) for x in self.x]
        given = [given] if isinstance(given, np.ndarray | Tensor) else list(given)
        if len(given) != len(self.x):
            raise ValueError(f"direction: {len(given)} arrays for {len(self.x)} checked inputs")
        out = []
        for d, x in zip(given, self.x, strict=True):
            d = np.asarray(d.data if isinstance(d, Tensor) else d, dtype=np.float64)
            if d.shape != x.shape:
                raise ValueError(f"direction: shape {d.shape} for an input of shape {x.shape}")
            out.append(d)
        return out

    def check_finite(self, name: str) -> None:
        if not np.all(np.isfinite(self.out * self.seed)):
            raise ValueError(f"{name}: sum(fn(x) * grad_output) is not finite at x; leave the"
                             " non-finite outputs out, e.g. where(isfinite(out), out, 0)")


# ---------------------------------------------------------------------------------------
# finite differences, element by element
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InputCheck:
    """The check of one input: both gradients and the worst errors."""

    index: int  # position of the input in the argument list
    shape: tuple[int, ...]
    analytic: np.ndarray  # from backward(grad_output); zeros if backward never reached it
    numeric: np.ndarray  # central differences
    max_abs_err: float
    max_rel_err: float  # max |a - n| / max(|a|, |n|), 0 where both are 0
    passed: bool


@dataclass(frozen=True)
class GradcheckResult:
    """`passed` is True when every checked input passed."""

    passed: bool
    inputs: list[InputCheck]

    def __bool__(self) -> bool:
        return self.passed


def gradcheck(
    fn: Callable[..., Tensor],
    *inputs: Any,
    grad_output: Any = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    float32: bool = False,
) -> GradcheckResult:
    """Check `fn`'s backward against central differences for every input that requires grad.

    numeric[i] = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps), L = sum(fn(x) * grad_output),
    in float64; pass when |analytic - numeric| <= atol + rtol * |numeric| everywhere (NaN
    matching NaN counts as equal).

    Args:
        fn: called as `fn(*inputs)`; must return a Tensor.
        *inputs: Tensors (those with `requires_grad=True` are checked) and any
            other arguments (ids, masks, axes), passed through unchanged.
        grad_output: the seed of the vector-Jacobian product, shaped like the
            output; default ones (i.e. the gradient of `out.sum()`).
        eps: finite-difference step.
        atol, rtol: tolerance, as in `np.isclose(analytic, numeric)`.
        float32: emulate float32 (inputs and outputs rounded to it): at eps=1e-6 its
            rounding fails right rules; ``eps_sweep`` shows the eps that works.

    Returns: a `GradcheckResult`; the caller's tensors and their `.grad` are untouched.

    Raises:
        TypeError: `fn` did not return a Tensor.
        ValueError: no input requires grad, or grad_output has the wrong shape.

    Example:
        >>> from glassllm import Tensor
        >>> from glassllm.autograd import softmax
        >>> x = Tensor([[1.0, 2.0, 3.0]], requires_grad=True)
        >>> gradcheck(softmax, x, grad_output=np.array([[1.0, 0.0, 0.0]])).passed
        True
    """
    objective = _Objective("gradcheck", fn, inputs, grad_output, float32)
    results = []
    for k, i in enumerate(objective.checked):
        base, analytic = objective.x[k], objective.grads[k]
        numeric = np.zeros(base.shape)  # C order: `num` below is a view of it, never a copy
        flat, num = base.reshape(-1).copy(), numeric.reshape(-1)
        point = list(objective.x)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + eps
            point[k] = flat.reshape(base.shape)
            plus = objective(point)
            flat[j] = saved - eps
            point[k] = flat.reshape(base.shape)
            minus = objective(point)
            flat[j] = saved
            num[j] = (plus - minus) / (2 * eps)
        with np.errstate(invalid="ignore"):
            err = np.abs(analytic - numeric)
            scale = np.maximum(np.abs(analytic), np.abs(numeric))
            rel = np.where(scale > 0, err / np.where(scale > 0, scale, 1.0), 0.0)
        ok = bool(np.all(np.isclose(analytic, numeric, rtol=rtol, atol=atol, equal_nan=True)))
        results.append(InputCheck(index=i, shape=base.shape, analytic=analytic, numeric=numeric,
                                  max_abs_err=_nanmax(err), max_rel_err=_nanmax(rel), passed=ok))
    return GradcheckResult(passed=all(r.passed for r in results), inputs=results)


def _nanmax(a: np.ndarray) -> float:
    """Largest non-NaN entry, 0.0 for an empty or all-NaN array."""
    return float(np.nanmax(a)) if a.size and not np.all(np.isnan(a)) else 0.0


# ---------------------------------------------------------------------------------------
# the Taylor remainder: the order of the error, no tolerance
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaylorResult:
    """The remainders of the first-order prediction and the order they shrink at.

    ``order`` is None when every remainder is round-off (``linear``: L is linear along d,
    to rounding) or when too few are above it to measure a slope.
    """

    steps: np.ndarray           # h, halving each step
    remainders: np.ndarray      # |L(x + h d) - L(x) - h <dL/dx, d>|
    roundoff: np.ndarray        # each remainder's round-off level
    order: float | None         # the slope of log r against log h at the small-h end
    linear: bool                # every remainder is round-off
    passed: bool                # linear, or order >= 1.8
    float32: bool

    def __bool__(self) -> bool:
        return self.passed

    @property
    def verdict(self) -> str:
        """The order in words."""
        if self.linear:
            return "linear: every remainder is round-off, the prediction is exact"
        if self.order is not None and self.order >= 1.8:
            return "second order: the gradient is right"
        if self.order is not None and self.order <= 1.2:
            return "first order: the gradient is wrong, or x sits on a kink"
        return ("inconclusive: too few remainders clear of round-off (float32 leaves few);"
                " try another seed, or float64")


def taylor_test(fn: Callable[..., Tensor], *inputs: Any, grad_output: Any = None,
                direction: Any = None, h0: float | None = None, steps: int = TAYLOR_STEPS,
                seed: int = 0, float32: bool = False) -> TaylorResult:
    """The Taylor-remainder test of `fn`'s backward: the order of the error, not its size.

    r(h) = |L(x + h d) - L(x) - h <g, d>|, L = sum(fn(x) * grad_output), g = dL/dx from
    backward, h = h0, h0/2, ... For a right g and a smooth L, r(h) = O(h²): the order
    log2(r(h) / r(h/2)) is 2. A wrong g leaves r(h) ≈ h |<g_true - g, d>|: order 1. At a
    kink (relu at 0, tied maxima) no g predicts both sides: order 1 too. A function linear
    along d (add, reshape, getitem, embedding, masked_fill, rope, repeat_kv) has r(h) at
    round-off for every h: reported as ``linear``, with no order.

    The order is the mean of the last two slopes between consecutive remainders above
    `ABOVE_ROUNDOFF` times their round-off level (from the unit roundoff and the size of
    what L sums, see `_Objective.along`), the smallest steps clear of it. Between 1.2 and
    1.8 the test is inconclusive (``verdict``): in float32 about one case in a hundred,
    when round-off leaves only steps where the h³ term still counts. It costs one
    backward and steps + 1 forward passes.

    Args:
        fn, *inputs, grad_output: as `gradcheck`.
        direction: d, one array per checked input (or one array); default standard normal
            drawn with `seed`.
        h0, steps: the first h (default 2**-5; 2**-2 in float32, whose round-off hides
            the remainders of smaller steps) and how many halvings.
        float32: emulate float32 (inputs and outputs rounded to it).

    Raises: as `gradcheck`; ValueError when L is not finite at x, or `direction` does not
        fit the checked inputs.

    Example:
        >>> from glassllm.autograd import tanh, add
        >>> x = Tensor([0.3, -1.2], requires_grad=True)
        >>> round(taylor_test(tanh, x).order, 1)
        2.0
        >>> taylor_test(add, x, Tensor([1.0, 2.0])).linear
        True
    """
    objective = _Objective("taylor_test", fn, inputs, grad_output, float32)
    objective.check_finite("taylor_test")
    d = objective.direction(np.random.default_rng(seed), direction)
    h0 = (TAYLOR_H0_FLOAT32 if float32 else TAYLOR_H0) if h0 is None else float(h0)
    hs = h0 * 0.5 ** np.arange(steps)
    (base, base_noise), slope = objective.along(d, 0.0), objective.slope(d)
    signed, roundoff = np.empty(steps), np.empty(steps)
    for k, h in enumerate(hs):
        value, noise = objective.along(d, h)
        with np.errstate(invalid="ignore"):              # an inf - inf at a far point: NaN
            signed[k] = value - base - h * slope
        roundoff[k] = noise + base_noise
    r = np.abs(signed)
    above = r > ABOVE_ROUNDOFF * roundoff                 # NaN is never above
    # a slope between two steps whose remainders differ in sign measures where two terms of
    # the series cancel (h² against h³ at a large h), not the order: left out
    slopes = [float(np.log2(r[k] / r[k + 1])) for k in range(steps - 1)
              if above[k] and above[k + 1] and signed[k] * signed[k + 1] > 0]
    linear = not above.any() and bool(np.all(np.isfinite(r)))
    order = float(np.mean(slopes[-2:])) if slopes else None
    return TaylorResult(steps=hs, remainders=r, roundoff=roundoff, order=order, linear=linear,
                        passed=linear or (order is not None and order >= 1.8), float32=float32)


# ---------------------------------------------------------------------------------------
# the dot-product (adjoint) test, and the eps sweep
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AdjointResult:
    """<J^T u, v> (backward) against <u, J v> (central differences in direction v)."""

    vjp: float                  # <J^T u, v>
    jvp: float                  # <u, (fn(x + eps v) - fn(x - eps v)) / 2eps>
    eps: float
    abs_err: float
    tolerance: float            # rtol * max(|vjp|, |jvp|) + 4 x the difference's round-off
    passed: bool
    float32: bool

    def __bool__(self) -> bool:
        return self.passed


def adjoint_test(fn: Callable[..., Tensor], *inputs: Any, grad_output: Any = None,
                 direction: Any = None, eps: float | None = None, rtol: float | None = None,
                 seed: int = 0, float32: bool = False) -> AdjointResult:
    """The dot-product test: <u, J v> = <J^T u, v> for a random direction v.

    J^T u is the vector-Jacobian product backward(u) computes; J v, the Jacobian-vector
    product, comes from central differences along v alone, so the test costs two forward
    passes and one backward however many elements x has (gradcheck: two per element). u
    is grad_output, else standard normal drawn with `seed` (as v).

    Args:
        fn, *inputs: as `gradcheck`.
        grad_output: u; default standard normal.
        direction: v, one array per checked input (or one array); default standard normal.
        eps: the difference's step; default the cube root of the unit roundoff (6e-6 in
            float64, 5e-3 in float32), where truncation and rounding errors meet.
        rtol: relative tolerance, added to the rounding level of the difference; default
            1e-6 (float64), 1e-3 (float32).
        float32: emulate float32 (inputs and outputs rounded to it).

    Raises: as `taylor_test`.

    Example:
        >>> from glassllm.autograd import softmax
        >>> adjoint_test(softmax, Tensor([[1.0, 2.0, 3.0]], requires_grad=True)).passed
        True
    """
    rng = np.random.default_rng(seed)
    objective = _Objective("adjoint_test", fn, inputs, grad_output, float32, random_seed=rng)
    objective.check_finite("adjoint_test")
    v = objective.direction(rng, direction)
    eps = float(np.cbrt(unit_roundoff(float32))) if eps is None else float(eps)
    if not eps > 0:
        raise ValueError(f"adjoint_test: eps must be positive, got {eps}")
    rtol = (1e-3 if float32 else 1e-6) if rtol is None else float(rtol)
    vjp = objective.slope(v)
    (plus, plus_noise), (minus, minus_noise) = objective.along(v, eps), objective.along(v, -eps)
    jvp = (plus - minus) / (2 * eps)
    err = abs(vjp - jvp)
    tolerance = (rtol * max(abs(vjp), abs(jvp))
                 + ABOVE_ROUNDOFF * (plus_noise + minus_noise) / (2 * eps))
    return AdjointResult(vjp=vjp, jvp=jvp, eps=eps, abs_err=err, tolerance=tolerance,
                         passed=bool(err <= tolerance), float32=float32)


@dataclass(frozen=True)
class EpsSweep:
    """The error of the directional central difference at each eps, and the best eps."""

    eps: np.ndarray
    error: np.ndarray           # |(L(x + eps v) - L(x - eps v)) / 2eps - <g, v>|
    slope: float                # <g, v>: the analytic directional derivative
    rounding: np.ndarray        # the round-off of L over 2eps (/ 64 in float64): rising
    truncation: np.ndarray      # c · eps², c fitted where rounding is negligible: falling
    best_eps: float             # where the error is least
    best_error: float
    float32: bool


def eps_sweep(fn: Callable[..., Tensor], *inputs: Any, grad_output: Any = None,
              direction: Any = None, eps: Any = None, seed: int = 0,
              float32: bool = False) -> EpsSweep:
    """The finite difference's error against eps: truncation falls, rounding rises.

    For each eps, the central difference (L(x + eps v) - L(x - eps v)) / 2eps along a random
    direction v, against <g, v> from backward. Its error is about c·eps² (truncation: the
    third derivative) plus u·S/eps (rounding: the unit roundoff u times the scale S of L's
    terms, divided by the step), least near eps = (u S / c)^(1/3): about 1e-5 in float64
    and 1e-2 in float32 for L of order 1. Two forward passes per eps.

    Args:
        fn, *inputs, grad_output, direction, seed, float32: as `adjoint_test`.
        eps: the steps; default 1e-1 down to 1e-12, two per decade.

    Raises: as `taylor_test`.

    Example:
        >>> from glassllm.autograd import exp
        >>> sweep = eps_sweep(exp, Tensor([0.5, 1.0], requires_grad=True))
        >>> 1e-7 < sweep.best_eps < 1e-3 and sweep.best_error < 1e-8
        True
    """
    objective = _Objective("eps_sweep", fn, inputs, grad_output, float32)
    objective.check_finite("eps_sweep")
    v = objective.direction(np.random.default_rng(seed), direction)
    steps = SWEEP_EPS if eps is None else np.asarray(eps, dtype=np.float64).reshape(-1)
    if not steps.size or not np.all(steps > 0):
        raise ValueError("eps_sweep: eps must be positive numbers")
    slope = objective.slope(v)
    error, rounding = np.empty(steps.size), np.empty(steps.size)
    for k, e in enumerate(steps):
        (plus, plus_noise), (minus, minus_noise) = objective.along(v, e), objective.along(v, -e)
        with np.errstate(invalid="ignore"):
            error[k] = abs((plus - minus) / (2 * e) - slope)
        rounding[k] = (plus_noise + minus_noise) / (2 * e * objective.units)  # a typical size
    clean = (error > 100 * rounding) & np.isfinite(error)      # truncation's share, alone
    c = float(np.median(error[clean] / steps[clean] ** 2)) if clean.any() else 0.0
    best = int(np.nanargmin(error)) if np.isfinite(error).any() else 0
    return EpsSweep(eps=steps, error=error, slope=slope, rounding=rounding,
                    truncation=c * steps ** 2, best_eps=float(steps[best]),
                    best_error=float(error[best]), float32=float32)

"""A gradient checker: compare an op's backward with central finite differences.

For a function `fn` of some Tensors, the scalar L = sum(fn(*inputs) * grad_output)
has dL/dx equal to the vector-Jacobian product that `backward(grad_output)`
computes. The checker perturbs every element of every input that requires grad,

    numeric[i] = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps),

all in float64, and compares with the analytic gradient elementwise:
pass when |analytic - numeric| <= atol + rtol * |numeric| everywhere (NaN
matching NaN counts as equal).

Used by the test-suite on every op, by the service's `"check": true`, and by
students to check ops they write themselves (STYLE example 7).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.tensor import Tensor, no_grad

__all__ = ["GradcheckResult", "InputCheck", "gradcheck"]


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
) -> GradcheckResult:
    """Check `fn`'s backward against central differences for every input that requires grad.

    Args:
        fn: called as `fn(*inputs)`; must return a Tensor.
        *inputs: Tensors (those with `requires_grad=True` are checked) and any
            other arguments (ids, masks, axes), passed through unchanged.
        grad_output: the seed of the vector-Jacobian product, shaped like the
            output; default ones (i.e. the gradient of `out.sum()`).
        eps: finite-difference step.
        atol, rtol: tolerance, as in `np.isclose(analytic, numeric)`.

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
    args = [
        Tensor(x.data, requires_grad=True) if isinstance(x, Tensor) and x.requires_grad else x
        for x in inputs
    ]
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad; pass Tensor(..., requires_grad=True)")

    out = fn(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    seed = np.ones_like(out.data) if grad_output is None else np.asarray(grad_output, np.float64)
    if seed.shape != out.shape:
        raise ValueError(
            f"gradcheck: grad_output has shape {seed.shape}, the output has shape {out.shape}"
        )
    if out.requires_grad:
        out.backward(seed)

    def objective() -> float:
        with no_grad():
            return float(np.sum(fn(*args).data * seed))

    results = []
    for i in checked:
        x = args[i]
        analytic = x.grad if x.grad is not None else np.zeros_like(x.data)
        numeric = np.zeros(x.data.shape)  # C order: `num` below is a view of it, never a copy
        base = x.data  # read-only: perturb a copy and swap it in
        flat, num = base.reshape(-1).copy(), numeric.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + eps
            x.data = flat.reshape(base.shape)
            plus = objective()
            flat[j] = saved - eps
            x.data = flat.reshape(base.shape)
            minus = objective()
            flat[j] = saved
            num[j] = (plus - minus) / (2 * eps)
        x.data = base
        with np.errstate(invalid="ignore"):
            err = np.abs(analytic - numeric)
            scale = np.maximum(np.abs(analytic), np.abs(numeric))
            rel = np.where(scale > 0, err / np.where(scale > 0, scale, 1.0), 0.0)
        ok = bool(np.all(np.isclose(analytic, numeric, rtol=rtol, atol=atol, equal_nan=True)))
        results.append(
            InputCheck(
                index=i,
                shape=x.shape,
                analytic=analytic,
                numeric=numeric,
                max_abs_err=_nanmax(err),
                max_rel_err=_nanmax(rel),
                passed=ok,
            )
        )
    return GradcheckResult(passed=all(r.passed for r in results), inputs=results)


def _nanmax(a: np.ndarray) -> float:
    """Largest non-NaN entry, 0.0 for an empty or all-NaN array."""
    return float(np.nanmax(a)) if a.size and not np.all(np.isnan(a)) else 0.0

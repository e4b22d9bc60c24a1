"""An evaluation's ``check``: its gradients held against the function itself.

``"check": true`` compares every variable's gradient with central differences, element
by element (`glassllm.gradients.gradcheck`), answering per variable as it always has.
``"check": {"modes": [...], "float32": false, "eps": null, "seed": 0}`` picks from the
four checks of `glassllm.gradients.checks`, run on every variable that requires grad at
once, and answers per mode:

- ``finite_differences``: today's check, at ``eps`` (default 1e-6), maybe in float32;
- ``taylor``: the Taylor remainder's observed order (no eps to choose);
- ``adjoint``: the dot-product test <u, J v> = <J^T u, v> in a random direction;
- ``eps_sweep``: the error of the directional central difference at eps from 1e-1 to
  1e-12, the best eps marked;

``float32`` emulates float32 by rounding the function's inputs and outputs to it (the
engine stays float64); ``seed`` draws the random directions. Output positions that are
not finite (a masked -inf) are left out of the checked objective sum(out * grad_output),
and a ``note`` says so.

Cost, planned before any work: finite differences make 2 forward passes per checked
element (at most ``max_check_elements`` elements); the other modes a fixed number
(`PASSES`: 13 for Taylor, 2 for adjoint, 46 for the sweep), and each mode one forward and
one backward of its own (counted as 3 passes). Those fixed passes stay within
2 · ``max_check_elements`` (so 0 still turns every check off), and all passes × one
forward pass's work within ``max_matmul_madds`` (H5).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm import autograd
from glassllm.gradients import checks
from glassllm.sandbox.expr.expr_errors import ExprError, ExprLimitError
from glassllm.sandbox.expr.graph import NODE_COST
from glassllm.sandbox.limits import Limits
from glassllm.sandbox.wire import encode_array
from glassllm.tensor import Tensor

__all__ = ["MODES", "PASSES", "CheckPlan", "answer_elements", "bound", "plan", "run"]

MODES = ("finite_differences", "taylor", "adjoint", "eps_sweep")
FIELDS = ("modes", "float32", "eps", "seed")
SETUP = 3                  # each mode's own forward and backward, in forward passes
# forward passes per mode beyond its setup (finite differences: 2 per checked element)
PASSES = {"taylor": checks.TAYLOR_STEPS + 1, "adjoint": 2, "eps_sweep": 2 * checks.SWEEP_EPS.size}


@dataclass(frozen=True)
class CheckPlan:
    """What ``check`` asked for: ``modes`` (empty: no check); ``legacy`` for ``true``,
    answered per variable as before the modes existed."""

    modes: tuple[str, ...] = ()
    float32: bool = False
    eps: float | None = None
    seed: int = 0
    legacy: bool = False

    def __bool__(self) -> bool:
        return bool(self.modes)

    def passes(self, elements: int) -> int:
        """Forward passes the check makes (a backward counts as two)."""
        if self.legacy:
            return 2 * elements
        return self.fixed_passes() + 2 * elements * ("finite_differences" in self.modes)

    def fixed_passes(self) -> int:
        """The passes that do not grow with the elements: each mode's setup, and the
        Taylor, adjoint and sweep evaluations."""
        return sum(SETUP + PASSES.get(m, 0) for m in self.modes)


def plan(check: Any) -> CheckPlan:
    """``check`` read: false / true, or the object of modes. Raises `ExprError` naming
    ``check`` (or its field)."""
    if isinstance(check, bool):
        return CheckPlan(modes=("finite_differences",), legacy=True) if check else CheckPlan()
    if not isinstance(check, dict):
        raise ExprError("'check' must be true, false or {\"modes\": [...], \"float32\": false}",
                        input="check")
    unknown = sorted(set(check) - set(FIELDS))
    if unknown:
        raise ExprError(f"check: unknown field {unknown[0]!r}; the fields are "
                        + ", ".join(FIELDS), input=f"check.{unknown[0]}"[:80])
    modes = check.get("modes")
    if (not isinstance(modes, list) or not modes or len(set(map(repr, modes))) != len(modes)
            or not all(isinstance(m, str) and m in MODES for m in modes)):
        raise ExprError("check.modes must be a list of distinct modes from "
                        + ", ".join(MODES), input="check.modes")
    float32 = check.get("float32", False)
    if not isinstance(float32, bool):
        raise ExprError("check.float32 must be true or false", input="check.float32")
    eps = check.get("eps")
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, int | float)
                            or not 0 < eps <= 1):
        raise ExprError("check.eps must be a number in (0, 1], or null for each mode's"
                        " default", input="check.eps")
    seed = check.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 32:
        raise ExprError("check.seed must be an integer from 0 to 2**32 - 1", input="check.seed")
    return CheckPlan(tuple(modes), float32, None if eps is None else float(eps), seed)


def bound(check: CheckPlan, elements: int, forward_work: int, limits: Limits) -> None:
    """Refuse the check (413) before any compute when it would be too long (H5).

    Finite differences run the whole forward pass twice per checked element, so the work
    is ≈ passes · (the forward's multiply-adds + the elements it builds + a per-node cost):
    held to the same multiply-add limit as the rest of the request."""
    if "finite_differences" in check.modes and elements > limits.max_check_elements:
        raise ExprLimitError(f"check would finite-difference {elements} elements; the limit is"
                             f" {limits.max_check_elements}", input="check")
    if not check.legacy and check.fixed_passes() > 2 * limits.max_check_elements:
        raise ExprLimitError(f"check would make {check.fixed_passes()} forward passes beside"
                             f" finite differences; the limit is {2 * limits.max_check_elements}"
                             " (2 per element of max_check_elements)", input="check")
    passes = check.passes(elements)
    total = passes * forward_work
    if total > limits.max_matmul_madds:
        how = (f"finite-difference {elements} elements with 2 forward passes each"
               if check.legacy else f"make {passes} forward passes")
        raise ExprLimitError(f"check would {how}, {forward_work} operations per pass"
                             f" (multiply-adds, elements built, {NODE_COST} per node): {total}"
                             f" in all; the limit is {limits.max_matmul_madds} (SPEC H5)",
                             input="check")


def answer_elements(check: CheckPlan, elements: int) -> int:
    """Elements of the arrays the check answers: finite differences' analytic and numeric
    gradients, the Taylor test's three columns, the sweep's four."""
    size = {"finite_differences": 2 * elements, "taylor": 3 * checks.TAYLOR_STEPS,
            "adjoint": 0, "eps_sweep": 4 * checks.SWEEP_EPS.size}
    return sum(size[m] for m in check.modes)


def run(check: CheckPlan, fn: Callable[..., Tensor], names: list[str],
        values: list[np.ndarray], seed: np.ndarray) -> dict:
    """The check's answer: `fn` of one Tensor per name (the variables that require grad,
    at `values`), checked with grad_output `seed`."""
    inputs = [Tensor(v, requires_grad=True) for v in values]
    # A non-finite output (a masked -inf) makes sum(out * seed) non-finite, and its finite
    # differences NaN: those positions are left out of the checked objective, and said so.
    out = fn(*[Tensor(v) for v in values]).data
    finite = np.isfinite(out)
    note = None
    check_fn = fn
    if not finite.all():
        def check_fn(*tensors: Tensor) -> Tensor:
            return autograd.where(finite, fn(*tensors), 0.0)
        note = (f"{int(finite.size - finite.sum())} non-finite output positions are left out"
                " of the checked objective sum(out * grad_output)")
    if check.legacy:
        result = checks.gradcheck(check_fn, *inputs, grad_output=seed)
        return {name: {**_input_check(c), "note": note}
                for name, c in zip(names, result.inputs, strict=True)}
    kw = {"grad_output": seed, "float32": check.float32}
    report: dict[str, Any] = {"float32": check.float32}
    for mode in check.modes:
        if mode == "finite_differences":
            eps = 1e-6 if check.eps is None else check.eps
            result = checks.gradcheck(check_fn, *inputs, eps=eps, **kw)
            report[mode] = {"eps": _f(eps), "passed": result.passed,
                            "inputs": {name: _input_check(c) for name, c
                                       in zip(names, result.inputs, strict=True)}}
        elif mode == "taylor":
            t = checks.taylor_test(check_fn, *inputs, seed=check.seed, **kw)
            report[mode] = {"steps": encode_array(t.steps),
                            "remainders": encode_array(t.remainders),
                            "roundoff": encode_array(t.roundoff),
                            "order": None if t.order is None else _f(t.order),
                            "linear": t.linear, "passed": t.passed}
        elif mode == "adjoint":
            a = checks.adjoint_test(check_fn, *inputs, eps=check.eps, seed=check.seed, **kw)
            report[mode] = {"vjp": _f(a.vjp), "jvp": _f(a.jvp), "eps": _f(a.eps),
                            "abs_err": _f(a.abs_err), "tolerance": _f(a.tolerance),
                            "passed": a.passed}
        else:
            s = checks.eps_sweep(check_fn, *inputs, seed=check.seed, **kw)
            report[mode] = {"eps": encode_array(s.eps), "error": encode_array(s.error),
                            "rounding": encode_array(s.rounding),
                            "truncation": encode_array(s.truncation), "slope": _f(s.slope),
                            "best_eps": _f(s.best_eps), "best_error": _f(s.best_error)}
    report["passed"] = all(report[m]["passed"] for m in check.modes if m != "eps_sweep")
    report["note"] = note
    return report


def _input_check(c: checks.InputCheck) -> dict:
    return {"analytic": encode_array(c.analytic), "numeric": encode_array(c.numeric),
            "max_abs_err": _f(c.max_abs_err), "max_rel_err": _f(c.max_rel_err),
            "passed": c.passed}


def _f(x: float) -> Any:
    """A float on the wire: a JSON number, or the token of a non-finite one (H3)."""
    return encode_array(np.float64(x))

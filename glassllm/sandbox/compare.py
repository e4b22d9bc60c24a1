"""Compare a claimed array with the expected one, element by element.

The core of ``POST /api/v1/check`` and usable offline: an autograder holding the expected
gradient calls `compare` directly. Pure NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from glassllm.sandbox.wire import encode_array

__all__ = ["ATOL", "RTOL", "compare"]

RTOL, ATOL = 1e-5, 1e-8   # NumPy's allclose defaults


def _errors(expected: np.ndarray, given: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|given - expected| and that over |expected|; equal values (the same infinity, NaN and
    NaN) err 0, any other non-finite pair errs +inf; x / 0 is +inf for x > 0, 0 for 0."""
    same = (expected == given) | (np.isnan(expected) & np.isnan(given))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_err = np.where(same, 0.0, np.abs(given - expected))
        abs_err = np.where(np.isnan(abs_err), np.inf, abs_err)
        scale = np.abs(expected)
        rel_err = np.where(abs_err == 0, 0.0,
                           np.where(scale > 0, abs_err / np.where(scale > 0, scale, 1.0), np.inf))
    rel_err = np.where(np.isnan(rel_err), np.inf, rel_err)
    return abs_err, rel_err


def compare(expected: Any, given: Any, *, rtol: float = RTOL, atol: float = ATOL,
            reveal: bool = True) -> dict:
    """A report on `given` against `expected` (float64 arrays, any shape).

    Verdict per element: ``|given - expected| <= atol + rtol * |expected|`` (NumPy's
    ``isclose``), NaN matching NaN. The report (JSON-ready, non-finite numbers as tokens):

    - ``shape_match``, ``expected_shape``, ``given_shape``: no broadcasting; a wrong shape
      fails and stops there (``mask``, ``mismatches``, ``first_mismatch`` are null);
    - ``allclose``: every element matches; ``mismatches``: how many do not;
    - ``mask``: nested booleans shaped like `expected`, true where the element is wrong;
    - ``first_mismatch``: ``{"index": [...], "expected": x, "given": y}`` in C order;
    - ``max_abs_err``, ``max_rel_err`` (over all elements, 0 for empty arrays).

    With ``reveal=False`` the report keeps only the verdicts and the mismatch locations:
    no expected number and no error size (for one element, the given value plus its error
    is the expected value).

    Example:
        >>> r = compare([1.0, 2.0], [1.0, 2.5])
        >>> r["allclose"], r["mask"], r["first_mismatch"]["index"], r["max_abs_err"]
        (False, [False, True], [1], 0.5)
    """
    e = np.asarray(expected, dtype=np.float64)
    g = np.asarray(given, dtype=np.float64)
    report: dict[str, Any] = {"shape_match": e.shape == g.shape,
                              "expected_shape": list(e.shape), "given_shape": list(g.shape)}
    if e.shape != g.shape:
        report.update(allclose=False, mismatches=None, mask=None, first_mismatch=None)
        if reveal:
            report.update(max_abs_err=None, max_rel_err=None)
        return report
    wrong = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    first = None
    if wrong.any():
        index = np.unravel_index(int(np.argmax(wrong.reshape(-1))), e.shape)
        first = {"index": [int(i) for i in index]}
        if reveal:
            first.update(expected=encode_array(e[index]), given=encode_array(g[index]))
    report.update(allclose=not wrong.any(), mismatches=int(wrong.sum()), mask=wrong.tolist(),
                  first_mismatch=first)
    if reveal:
        abs_err, rel_err = _errors(e, g)
        report.update(max_abs_err=encode_array(abs_err.max(initial=0.0)),
                      max_rel_err=encode_array(rel_err.max(initial=0.0)))
    return report

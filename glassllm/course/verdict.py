"""A check a hand derivation can pass: per element, to N significant digits, with the
pattern of a mistake — the core shared by the page, the client, ``/api/v1/check`` and
the grader.

**Digits.** An element agrees to N digits when

    |claimed − expected| ≤ 10^(1−N) · P,   P = 10^⌊log10 s⌋,
    s = max(|expected|, 10^−3 · max|expected|)

that is, when it is off by at most one unit in the N-th significant digit of the expected
number, so an answer rounded or truncated to N digits passes and one written to N − 1
digits fails whenever it is two units off in digit N. ``s`` is the form of the rule that
lets round-off zeros pass: an element 10^−17 where the array's largest is 1 is read on
the scale of 10^−3, and a claimed 0 agrees. An array whose expected elements are all 0 is
read on the scale 1. (P is s's power of ten, not s itself: with s, a number starting with
a 9 would get nearly ten units of slack in digit N and 0.988 would pass as 4 digits of
0.98765.) The digits an element agrees to, `digits_agreed`, is the largest N for which
it agrees (0 to 17; infinity when equal, the same infinity, or NaN and NaN).

**atol / rtol** instead: NumPy's ``isclose`` (NaN equal to NaN).

`grade` returns a `Verdict`; `Verdict.public(feedback, reveal)` is what a student may see:
``digits+pattern`` (the digits of each element, and the pattern), ``pattern`` (the
pattern and pass / fail per element, no digits), ``pass/fail`` (one boolean). The
expected numbers appear only with ``reveal``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from glassllm.course import patterns
from glassllm.course.patterns import Pattern
from glassllm.sandbox.wire import encode_array

__all__ = ["FEEDBACK", "Rule", "Verdict", "agrees", "digits_agreed", "grade"]

FEEDBACK = ("digits+pattern", "pattern", "pass/fail")
MAX_DIGITS = 17                # float64 holds 15-17 significant digits
SLACK = 1 + 1e-9               # the float rounding of |c - e| at an exact boundary


@dataclass(frozen=True)
class Rule:
    """How close is right: ``digits`` significant digits, or NumPy's ``atol``/``rtol``."""

    digits: int | None = 4
    atol: float | None = None
    rtol: float | None = None

    def __post_init__(self) -> None:
        if (self.digits is None) == (self.atol is None and self.rtol is None):
            raise ValueError("a rule is digits, or atol / rtol, not both and not neither")
        if self.digits is not None and not (isinstance(self.digits, int)
                                            and 1 <= self.digits <= MAX_DIGITS):
            raise ValueError(f"digits must be an integer from 1 to {MAX_DIGITS}")

    def public(self) -> dict:
        if self.digits is not None:
            return {"digits": self.digits}
        return {"atol": 1e-8 if self.atol is None else self.atol,
                "rtol": 1e-5 if self.rtol is None else self.rtol}

    def says(self) -> str:
        if self.digits is not None:
            return f"{self.digits} significant digits"
        p = self.public()
        return f"|claimed − expected| ≤ {p['atol']:g} + {p['rtol']:g} · |expected|"


def _scale(e: np.ndarray) -> np.ndarray:
    """P of the module docstring, per element: the power of ten of max(|e|, 1e-3·max|e|)."""
    a = np.where(np.isfinite(e), np.abs(e), 0.0)
    s = np.maximum(a, 1e-3 * a.max(initial=0.0))
    s = np.where(s > 0, s, 1.0)
    with np.errstate(divide="ignore"):
        p = 10.0 ** np.floor(np.log10(s))
    p = np.where(p * 10 <= s, p * 10, p)           # log10's rounding at a power of ten
    return np.where(p > s, p / 10, p)


def _errors(e: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|c − e| (inf where either is non-finite and they differ) and where they are equal."""
    same = (e == c) | (np.isnan(e) & np.isnan(c))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(c - e)
    return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf)), same


def digits_agreed(expected: Any, claimed: Any) -> np.ndarray:
    """The significant digits each element of `claimed` agrees to (the module docstring's
    rule), as float64: 0 to 17, or inf where equal.

    Example:
        >>> digits_agreed([0.98765, 0.98765, 1e-17, 1.0], [0.9877, 0.988, 0.0, 1.0]).tolist()
        [4.0, 3.0, 15.0, inf]
    """
    e, c = np.asarray(expected, np.float64), np.asarray(claimed, np.float64)
    err, same = _errors(e, c)
    return _digits(err, same, _scale(e))


def _digits(err: np.ndarray, same: np.ndarray, scale: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.floor(1 + np.log10(scale * SLACK / err))
    d = np.clip(np.where(np.isnan(d), 0.0, d), 0, MAX_DIGITS)
    return np.where(same, np.inf, d)


def agrees(expected: Any, claimed: Any, rule: Rule) -> np.ndarray:
    """Per element (same shapes): does `claimed` agree with `expected` under `rule`?"""
    e, c = np.asarray(expected, np.float64), np.asarray(claimed, np.float64)
    if rule.digits is None:
        p = rule.public()
        return np.isclose(c, e, rtol=p["rtol"], atol=p["atol"], equal_nan=True)
    err, same = _errors(e, c)
    return same | (err <= 10.0 ** (1 - rule.digits) * _scale(e) * SLACK)


@dataclass(frozen=True, eq=False)
class Verdict:
    """One claimed array graded against its expected one (see `grade`)."""

    passed: bool
    rule: Rule
    expected: np.ndarray = field(repr=False)
    claimed: np.ndarray = field(repr=False)
    agree: np.ndarray | None = field(default=None, repr=False)     # per element
    digits: np.ndarray | None = field(default=None, repr=False)    # per element
    pattern: Pattern | None = None

    @property
    def shape_ok(self) -> bool:
        return self.expected.shape == self.claimed.shape

    @property
    def score(self) -> float:
        """1 when it passes, else 0."""
        return 1.0 if self.passed else 0.0

    def public(self, feedback: str = "digits+pattern", reveal: bool = False) -> dict:
        """What the student may see at this feedback level, JSON-ready; the expected
        numbers only with `reveal`."""
        if feedback not in FEEDBACK:
            raise ValueError(f"feedback must be one of {', '.join(FEEDBACK)}")
        out: dict[str, Any] = {"passed": self.passed, "rule": self.rule.public()}
        if feedback != "pass/fail":
            out.update(expected_shape=list(self.expected.shape),
                       claimed_shape=list(self.claimed.shape),
                       agree=None if self.agree is None else self.agree.tolist(),
                       agreed=None if self.agree is None else int(self.agree.sum()),
                       elements=int(self.expected.size),
                       pattern=None if self.pattern is None else self.pattern.public(reveal))
        if feedback == "digits+pattern":
            out["digits"] = None if self.digits is None else encode_array(self.digits)
            out["min_digits"] = None if self.digits is None else encode_array(
                np.float64(self.digits.min(initial=np.inf)))
        if reveal:
            out["expected"] = encode_array(self.expected)
        return out


def grade(expected: Any, claimed: Any, digits: int | None = None, atol: float | None = None,
          rtol: float | None = None, context: Mapping[str, Any] | None = None) -> Verdict:
    """Grade `claimed` against `expected` (float64 arrays of any shape).

    The rule is `digits` significant digits (default 4 when neither digits nor atol /
    rtol is given), or NumPy's ``isclose`` with `atol` / `rtol`. `context` names what a
    pattern may speak of: ``{"masks": {name: bool array}, "factors": {"N": (4.0, "the
    batch size")}}`` (`glassllm.course.cases.Case` holds both for an exercise).

    Example:
        >>> v = grade([[0.5, -0.25], [1.0, 2.0]], [[-0.5, 0.25], [-1.0, -2.0]])
        >>> v.passed, v.pattern.name
        (False, 'sign_flipped')
        >>> grade([0.123456], [0.1235], digits=4).passed
        True
    """
    if digits is None and atol is None and rtol is None:
        digits = 4
    rule = Rule(digits, atol, rtol)
    e, c = np.asarray(expected, np.float64), np.asarray(claimed, np.float64)
    context = context or {}

    def agree(exp: np.ndarray, cl: np.ndarray) -> np.ndarray:
        return agrees(exp, cl, rule)

    if e.shape != c.shape:
        return Verdict(False, rule, e, c, pattern=patterns.find(e, c, agree))
    err, same = _errors(e, c)              # once, for the verdict and the digits both
    scale = _scale(e)
    if rule.digits is None:
        ok = agrees(e, c, rule)
    else:
        ok = same | (err <= 10.0 ** (1 - rule.digits) * scale * SLACK)
    passed = bool(ok.all())
    found = None if passed else patterns.find(e, c, agree, context.get("masks"),
                                              context.get("factors"), ok)
    return Verdict(passed, rule, e, c, ok, _digits(err, same, scale), found)

"""Grade a claimed value and gradients, ``POST /api/v1/check``.

The body is one case (an op call or an expression, see `glassllm_service.requests.case`)
plus ``claimed`` (``{"value": ..., "grads": {name: ...}}``, either part optional),
``rtol`` / ``atol`` (default NumPy's 1e-5 / 1e-8) or ``digits`` (significant digits, the
exercises' check: `glassllm.course.verdict`), and ``reveal`` (default true). The sandbox
computes the case as its own route would, then compares each claimed array with
`glassllm.sandbox.compare.compare`; with ``digits``, each report also says to how many
digits each element agrees (``digits``) and the pattern of a mistake (``pattern``).

``reveal: false`` answers verdicts and mismatch locations only. It is a convenience for
graded feedback, not secrecy: the same sandbox computes any value or gradient on request.
In course mode a check is held to what eval is held to (docs/modes.md): an open
exercise's hidden op on the student's numbers is refused whatever ``reveal`` says.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from glassllm.course import Hidden, grade
from glassllm.errors import echo_name
from glassllm.sandbox.compare import ATOL, RTOL, compare
from glassllm.sandbox.wire import coerce, encode_array
from glassllm_service.body import check_answer
from glassllm_service.codec import dumps
from glassllm_service.course_state import CourseState
from glassllm_service.envelope import CHECK, CLAIM, read
from glassllm_service.http_errors import ApiError
from glassllm_service.requests.case import Case, prepare_case, run_case
from glassllm_service.settings import Settings

SEND = '{"op": ..., "claimed": ...}'          # what an empty body is told to send
BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"type": "object", "required": ["claimed"], "properties": {
        "op": {"type": "string"}, "inputs": {"type": "object"},
        "requires_grad": {"anyOf": [{"type": "null"}, {"type": "array",
                                                       "items": {"type": "string"}}]},
        "expression": {"type": "string"}, "variables": {"type": "object"},
        "grad_output": {"anyOf": [{"type": "null"},
                                  {"$ref": "#/components/schemas/FloatArray"}]},
        "expand": {"type": "boolean", "description": "taken as /api/v1/eval takes it (the"
                   " page sends it with composite ops opened); changes no value or gradient"},
        "claimed": {"type": "object", "additionalProperties": False, "properties": {
            "value": {"$ref": "#/components/schemas/FloatArray"},
            "grads": {"type": "object", "additionalProperties": {
                "$ref": "#/components/schemas/FloatArray"}}}},
        "rtol": {"type": "number", "minimum": 0, "default": RTOL},
        "atol": {"type": "number", "minimum": 0, "default": ATOL},
        "digits": {"type": "integer", "minimum": 1, "maximum": 17, "description":
                   "instead of rtol / atol: each element must agree to this many"
                   " significant digits (docs/exercises.md#the-check)"},
        "reveal": {"type": "boolean", "default": True}}},
    "example": {"op": "softmax", "inputs": {"a": [[1.0, 2.0, 3.0]]},
                "grad_output": [[1.0, 0.0, 0.0]],
                "claimed": {"grads": {"a": [[0.0, 0.0, 0.0]]}}, "reveal": False}}}}}


class Check:
    """A case past every check, and the claim to compare with its answer."""

    __slots__ = ("case", "claim")

    def __init__(self, case: Case, claim: dict) -> None:
        self.case, self.claim = case, claim

    @property
    def cost(self) -> tuple[int, int]:
        return self.case.cost

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        """Held to exactly what eval is held to: refused (403 ``hidden_by_exercise``) while
        an open exercise hides the expected numbers of an op the case runs on numbers the
        student chose, ``reveal`` true or false. A verdict per element is an oracle: with
        ``atol`` a claimed gradient bisected against it gives the hidden one back."""
        err = course.refusal(self.case.uses(), hidden)
        if err is not None:
            raise err

    def answer(self) -> bytes:
        """Run in a worker thread, inside a compute slot: the case, then each claimed array
        compared with it."""
        solved = run_case(self.case)
        value, grads = self.claim["value"], self.claim["grads"]
        kw = {k: self.claim[k] for k in ("rtol", "atol", "reveal")}
        digits = self.claim["digits"]
        for name in grads:
            if name not in solved.grads:
                raise ApiError(422, "invalid_input", f"claimed.grads names"
                               f" '{echo_name(name)}', which has no gradient here; gradients"
                               " computed: " + (", ".join(solved.grads) or "none"),
                               op=solved.op, input=f"claimed.grads.{echo_name(name)}")
        def report(expected: np.ndarray, claimed: np.ndarray) -> dict:
            if digits is None:
                return compare(expected, claimed, **kw)
            return by_digits(expected, claimed, digits, kw["reveal"])

        out: dict[str, Any] = {
            "value": None if value is None else report(solved.value, value),
            "grads": {name: report(solved.grads[name], g) for name, g in grads.items()},
            **kw, "warnings": solved.warnings}
        if digits is not None:
            out["digits"] = digits
        reports = [r for r in (out["value"], *out["grads"].values()) if r is not None]
        out["passed"] = all(r["allclose"] for r in reports)
        return dumps(out)


def by_digits(expected: np.ndarray, claimed: np.ndarray, digits: int, reveal: bool) -> dict:
    """`compare`'s report with the digits rule deciding: the verdict per element, the
    digits each agrees to and the pattern of a mistake (no expected number unless
    `reveal`). One grading pass; the error sizes only when revealed."""
    verdict = grade(expected, claimed, digits=digits)
    report: dict[str, Any] = {"shape_match": verdict.shape_ok,
                              "expected_shape": list(verdict.expected.shape),
                              "given_shape": list(verdict.claimed.shape),
                              "allclose": verdict.passed, "mismatches": None, "mask": None,
                              "first_mismatch": None, "digits": None}
    if verdict.agree is not None:
        wrong = ~verdict.agree
        first = None
        if not verdict.passed:
            index = np.unravel_index(int(np.argmax(wrong.reshape(-1))), wrong.shape)
            first = {"index": [int(i) for i in index]}
            if reveal:
                first.update(expected=encode_array(verdict.expected[index]),
                             given=encode_array(verdict.claimed[index]))
        report.update(mismatches=int(wrong.size - verdict.agree.sum()), mask=wrong.tolist(),
                      first_mismatch=first, digits=encode_array(verdict.digits))
    if reveal:
        sizes = compare(expected, claimed) if verdict.shape_ok else {}
        report.update(max_abs_err=sizes.get("max_abs_err"),
                      max_rel_err=sizes.get("max_rel_err"))
    report["pattern"] = None if verdict.pattern is None else verdict.pattern.public(reveal)
    return report


def _digits(body: dict) -> int | None:
    value = body.get("digits")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 17:
        raise ApiError(422, "invalid_request", "'digits' must be an integer from 1 to 17",
                       input="digits")
    if "rtol" in body or "atol" in body:
        raise ApiError(422, "invalid_request", "give 'digits', or 'rtol' / 'atol', not both",
                       input="digits")
    return value


def _tolerance(body: dict, name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0):
        raise ApiError(422, "invalid_request", f"'{name}' must be a finite number >= 0",
                       input=name)
    return float(value)


def _claimed(body: dict, settings: Settings, maybe_bools: bool) -> tuple[Any, dict]:
    claimed = body.get("claimed")
    if not isinstance(claimed, dict) or not claimed or set(claimed) - {"value", "grads"}:
        raise ApiError(422, "invalid_request", "'claimed' must be an object with \"value\""
                       " and / or \"grads\" (input name → array)", input="claimed")
    grads = claimed.get("grads", {})
    if not isinstance(grads, dict):
        raise ApiError(422, "invalid_request", "'claimed.grads' must be an object: input name"
                       " → array", input="claimed.grads")
    # the one coercion of glassllm.sandbox.wire: a binary array's declared size is held to
    # the limit before decoding; a WireError (422) or LimitError (413) is mapped by the
    # app's handlers
    limit = settings.limits.max_array_elements
    # maybe_bools as the body says (no true / false in it: NumPy's fast conversion), as
    # the case's own arrays are read; the exact path walked every claimed element
    value = None if "value" not in claimed else coerce(
        "tensor", "claimed.value", claimed["value"], maybe_bools=maybe_bools,
        max_elements=limit)
    grads = {name: coerce("tensor", f"claimed.grads.{name}", g, maybe_bools=maybe_bools,
                          max_elements=limit) for name, g in grads.items()}
    return value, grads


def prepare(body: Any, maybe_bools: bool, settings: Settings) -> Check:
    """Every check of a check request, no compute: the prepared case and the claim."""
    read(body, CHECK)
    rtol, atol = _tolerance(body, "rtol", RTOL), _tolerance(body, "atol", ATOL)
    digits = _digits(body)
    reveal = body.get("reveal", True)
    if not isinstance(reveal, bool):
        raise ApiError(422, "invalid_request", "'reveal' must be true or false", input="reveal")
    value, grads = _claimed(body, settings, maybe_bools)
    case = prepare_case({k: v for k, v in body.items() if k not in CLAIM}, maybe_bools,
                        settings)
    if case.error is not None:
        raise case.error
    # held: the case's value and gradients and the claims; returned: a mask per claim
    claims = int(np.size(value)) if value is not None else 0
    claims += sum(int(np.size(g)) for g in grads.values())
    check_answer(case.answer + 2 * claims, settings, input="claimed",
                 what="the case's value and gradients with the claims and their masks")
    return Check(case, {"value": value, "grads": grads, "rtol": rtol, "atol": atol,
                        "reveal": reveal, "digits": digits})

"""Several op calls and expressions in one request, ``POST /api/v1/batch``.

The cases are answered independently and in order: each answer is the case's result (the
body ``POST /api/v1/ops/{name}`` or ``POST /api/v1/eval`` would give, without the eval's
node list) or its own ``{"error": {...}}``, so one bad case never spoils the others.

Bounded up front (H5): at most ``GLASSLLM_MAX_BATCH`` cases, and the planned work of all
cases together — the sum of each case's ``cost``
(`glassllm_service.requests.case.prepare_case`: the elements it builds plus its matmul
multiply-adds) — at most ``GLASSLLM_MAX_MATMUL_MADDS``, the work one request may do; and
the arrays all cases return together (each case's value and gradients, an expression's
nodes), held until the answer is written, at most ``GLASSLLM_MAX_ANSWER_ELEMENTS``. Every
case is prepared (all its checks, no compute) first; a batch past any bound is refused
whole with 413, naming the case that pushes it over, before any case is computed. Then
each prepared case runs.
"""

from __future__ import annotations

from typing import Any

from glassllm.course import Hidden
from glassllm.errors import InputError
from glassllm_service.body import check_answer
from glassllm_service.codec import computed, dumps, encoding_of
from glassllm_service.course_state import CourseState
from glassllm_service.envelope import cases
from glassllm_service.http_errors import ApiError, from_input_error
from glassllm_service.requests.case import Case, prepare_case, run_case
from glassllm_service.settings import Settings

SEND = '{"cases": [...]}'          # what an empty body is told to send
CASE = {"type": "object", "description": "an op call {op, inputs, requires_grad, grad_output}"
        " or an expression {expression, variables, grad_output, expand}",
        "properties": {"op": {"type": "string"}, "inputs": {"type": "object"},
                       "requires_grad": {"anyOf": [{"type": "null"},
                                                   {"type": "array",
                                                    "items": {"type": "string"}}]},
                       "expression": {"type": "string"}, "variables": {"type": "object"},
                       "grad_output": {"anyOf": [{"type": "null"},
                                                 {"$ref": "#/components/schemas/FloatArray"}]},
                       "expand": {"type": "boolean", "description": "taken as /api/v1/eval"
                                  " takes it; changes no value or gradient"}}}
BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"type": "object", "required": ["cases"], "additionalProperties": False,
               "properties": {"cases": {"type": "array", "items": CASE},
                              "encoding": {"enum": ["json", "base64"]}}},
    "example": {"cases": [
        {"op": "mul", "inputs": {"a": [1.0, 2.0], "b": [3.0, 4.0]}},
        {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}},
        {"op": "nope", "inputs": {}}]}}}}}


class Batch:
    """Every case of a batch past its checks (or refused on its own), before any compute."""

    __slots__ = ("cases", "cost", "encoding")

    def __init__(self, cases: list[Case], cost: int, encoding: str) -> None:
        self.cases, self.cost, self.encoding = cases, cost, encoding

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        """A case that would compute what an open exercise hides is refused on its own
        (403 in its place of the results)."""
        for i, case in enumerate(self.cases):
            if case.error is None:
                err = course.refusal(case.uses(), hidden)
                if err is not None:
                    err.input = f"cases[{i}]"
                    case.error = err

    def answer(self) -> bytes:
        """Run in a worker thread, inside one compute slot: each case answered on its own."""
        results = []
        for i, case in enumerate(self.cases):
            try:
                solved = run_case(case)
            except (ApiError, InputError) as exc:
                err = exc if isinstance(exc, ApiError) else from_input_error(exc)
                err.extra["case"] = i
                results.append(err.body())
                continue
            head = {"op": solved.op} if solved.op else {}
            results.append(computed(solved.value, solved.grads, solved.warnings,
                                    self.encoding, **head))
        return dumps({"results": results})


def prepare(body: Any, maybe_bools: bool, settings: Settings) -> Batch:
    """Every case checked and planned (no compute), the batch's total planned work and the
    arrays it returns bounded up front."""
    given = cases(body)
    encoding = encoding_of(body)
    if len(given) > settings.max_batch:
        raise ApiError(413, "too_large", f"the batch has {len(given)} cases; the limit is"
                       f" {settings.max_batch} (GLASSLLM_MAX_BATCH)",
                       input=f"cases[{settings.max_batch}]")
    prepared, total, answer = [], 0, 0
    for i, case in enumerate(given):
        prepared.append(prepare_case(case, maybe_bools, settings, f"cases[{i}]"))
        total += prepared[-1].work
        if total > settings.max_matmul_madds:
            raise ApiError(413, "too_large", f"cases[{i}] brings the batch's planned work to"
                           f" {total} (elements plus multiply-adds); the limit is"
                           f" {settings.max_matmul_madds} (GLASSLLM_MAX_MATMUL_MADDS)",
                           input=f"cases[{i}]")
        answer += prepared[-1].answer      # the answers are held until the last case's
        check_answer(answer, settings, what=f"cases[0..{i}] together", input=f"cases[{i}]")
    return Batch(prepared, total, encoding)

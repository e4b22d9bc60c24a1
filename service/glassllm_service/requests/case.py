"""One case, an op call or an expression, as the batch and check routes run it (issue 12).

A case is ``{"op": name, "inputs": {...}, "requires_grad": [...], "grad_output": ...}`` (the
body of ``POST /api/v1/ops/{name}`` with the op's name in it) or ``{"expression": ...,
"variables": {...}, "grad_output": ..., "expand": ...}`` (the body of ``POST /api/v1/eval``;
``expand``, a boolean, is taken so that a body the page or a tool built for eval, composite
ops opened, can be checked as it is: it changes no value or gradient, and neither route
answers nodes, so the expansions are not computed). It goes
through the library's one request path in two steps, as the ops route does
(`glassllm_service.requests.op`):

- `prepare_case`: every check, no compute. An op case is `glassllm.sandbox.registry.prepare`'s
  `Prepared`; an expression is `glassllm.sandbox.expr.prepare`'s `PreparedExpression`. Either
  way its ``cost`` (elements, multiply-adds) is known here, so a batch bounds the sum of its
  cases' costs before it computes anything. A refusal is kept as the case's answer.
- `run_case`: `glassllm.sandbox.registry.run` / `glassllm.sandbox.expr.run` (compute only).

The check route prepares one case, then runs it inside a compute slot
(`glassllm_service.admission`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from glassllm.errors import InputError, echo_name
from glassllm.sandbox import expr, registry
from glassllm_service.http_errors import ApiError, from_input_error
from glassllm_service.requests import expression as eval_routes
from glassllm_service.requests.op import prepare_body, run_prepared
from glassllm_service.routes.ops import find
from glassllm_service.settings import Settings

OP_FIELDS = ("op", "inputs", "requires_grad", "grad_output")
EXPRESSION_FIELDS = ("expression", "variables", "grad_output", "expand")
EVAL_ONLY = ("check", "encoding")  # eval's own options: a case's answer has no place for them


@dataclass
class Solved:
    """A case's answer as NumPy: ``op`` is None for an expression."""

    op: str | None
    value: np.ndarray
    grads: dict[str, np.ndarray]
    warnings: list[str]


@dataclass
class Case:
    """A case past every check (or refused: ``error``), before any compute."""

    op: str | None = None
    prepared: registry.Prepared | None = None      # an op case
    expression: expr.PreparedExpression | None = None  # an expression case
    messages: list[str] = field(default_factory=list)  # its float warnings so far
    cost: tuple[int, int] = (0, 0)                 # elements, multiply-adds (Prepared.cost)
    answer: int = 0                                # elements of arrays it returns (planned)
    error: ApiError | None = None                  # the case's own refusal

    @property
    def work(self) -> int:
        """The planned work a batch adds up: elements plus multiply-adds."""
        return sum(self.cost)


def split(case: Any, where: str) -> tuple[str, dict]:
    """``("op", body)`` or ``("expression", body)``.

    Raises ApiError 422 naming `where` (``cases[3]``, ``request body``) when the case is
    neither, or has a field that belongs to neither.
    """
    if not isinstance(case, dict) or ("op" in case) == ("expression" in case):
        raise ApiError(422, "invalid_request", f"{where} must be an object with either \"op\""
                       " (and inputs, requires_grad, grad_output) or \"expression\" (and"
                       " variables, grad_output)", input=where)
    kind, fields = ("op", OP_FIELDS) if "op" in case else ("expression", EXPRESSION_FIELDS)
    unknown = sorted(set(case) - set(fields))
    if unknown:
        own = (f" ('{unknown[0]}' is /api/v1/eval's own option)"
               if kind == "expression" and unknown[0] in EVAL_ONLY else "")
        raise ApiError(422, "invalid_request", f"{where}: unknown field '{echo_name(unknown[0])}';"
                       f" the fields of an {kind} case are {', '.join(fields)}{own}",
                       input=f"{where}.{echo_name(unknown[0])}")
    if kind == "op" and not isinstance(case["op"], str):
        raise ApiError(422, "invalid_request", f"{where}: 'op' must be an op name",
                       input=f"{where}.op")
    return kind, dict(case)


def _find(name: str, where: str) -> registry.Op:
    try:
        return find(name)
    except ApiError as exc:
        exc.input = f"{where}.op" if where != "request body" else "op"
        raise


def _prepare(case: Any, maybe_bools: bool, settings: Settings, where: str) -> Case:
    kind, body = split(case, where)
    if kind == "op":
        op = _find(body.pop("op"), where)
        prepared = prepare_body(op, body, maybe_bools, settings)
        return Case(op=op.name, prepared=prepared, cost=prepared.cost,
                    answer=prepared.answer_elements)
    if not isinstance(body.pop("expand", False), bool):  # eval's rule, eval's code
        field = "expand" if where == "request body" else f"{where}.expand"
        raise ApiError(422, "invalid_expression", f"'{field}' must be true or false",
                       input=field)
    messages: list[str] = []
    prepared_expression = eval_routes.prepare_body(body, maybe_bools, settings, messages)
    # an expression case answers its value and gradients, but builds its nodes' first
    return Case(expression=prepared_expression, messages=messages,
                cost=prepared_expression.cost, answer=prepared_expression.answer_elements)


def prepare_case(case: Any, maybe_bools: bool, settings: Settings,
                 where: str = "request body") -> Case:
    """Every check of one case, no compute; a refusal becomes the case's ``error``."""
    try:
        return _prepare(case, maybe_bools, settings, where)
    except ApiError as exc:
        return Case(error=exc)
    except InputError as exc:
        return Case(op=getattr(exc, "op", None), error=from_input_error(exc))
    except MemoryError:
        return Case(error=ApiError(413, "too_large", "the computation ran out of memory"))


def run_case(case: Case, maybe_bools: bool, settings: Settings) -> Solved:
    """Compute a prepared case; its refusal (from `prepare_case` or the run) is raised."""
    if case.error is not None:
        raise case.error
    if case.prepared is not None:
        result, warnings = run_prepared(case.prepared)
        return Solved(case.op, result.value, result.grads, warnings)
    # the arrays themselves, not their wire JSON: a NaN's sign and payload survive to a
    # base64 answer (H3), and no array is written as JSON only to be read back
    answer = eval_routes.run_body(case.expression, case.messages, arrays=True)
    return Solved(None, answer["value"], answer["grads"], answer["warnings"])

"""One case, an op call or an expression, as a batch and a check hold it.

A case is ``{"op": name, "inputs": {...}, "requires_grad": [...], "grad_output": ...}`` (the
body of ``POST /api/v1/ops/{name}`` with the op's name in it) or ``{"expression": ...,
"variables": {...}, "grad_output": ..., "expand": ...}`` (the body of ``POST /api/v1/eval``;
``expand``, a boolean, is taken so that a body the page or a tool built for eval, composite
ops opened, can be checked as it is: it changes no value or gradient, and neither a batch
nor a check answers nodes, so the expansions are not computed). It goes through the
request kind's own two steps (`glassllm_service.requests.op_call`,
`glassllm_service.requests.expression`):

- `prepare_case`: every check, no compute; its ``cost`` (elements, multiply-adds) is known
  here, so a batch bounds the sum of its cases' costs before it computes anything. A
  refusal is kept as the case's answer.
- `run_case`: the compute only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.errors import InputError
from glassllm.sandbox.registry import Op
from glassllm_service.course_state import Uses
from glassllm_service.envelope import OP_CASE, TOP, case_kind
from glassllm_service.http_errors import ApiError, from_input_error
from glassllm_service.requests import expression, op_call
from glassllm_service.settings import Settings


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
    call: op_call.OpCall | None = None             # an op case
    evaluation: expression.Evaluation | None = None  # an expression case
    cost: tuple[int, int] = (0, 0)                 # elements, multiply-adds (Prepared.cost)
    answer: int = 0                                # elements of arrays it returns (planned)
    error: ApiError | None = None                  # the case's own refusal

    @property
    def work(self) -> int:
        """The planned work a batch adds up: elements plus multiply-adds."""
        return sum(self.cost)

    def uses(self) -> Uses:
        """What it runs, for the open exercises' hiding, as its own route reads it; its
        answer holds no nodes."""
        if self.call is not None:
            return self.call.uses()
        if self.evaluation is not None:
            return self.evaluation.uses(nodes=False)
        return Uses({})


def _find(name: str, where: str) -> Op:
    try:
        return op_call.find(name)
    except ApiError as exc:
        exc.input = f"{where}.op" if where != TOP else "op"
        raise


def _prepare(case: Any, maybe_bools: bool, settings: Settings, where: str) -> Case:
    kind, body = case_kind(case, where)
    if kind is OP_CASE:
        call = op_call.prepare(_find(body.pop("op"), where), body, maybe_bools, settings)
        return Case(op=call.prepared.op.name, call=call, cost=call.cost,
                    answer=call.prepared.answer_elements)
    if not isinstance(body.pop("expand", False), bool):  # eval's rule, eval's code
        name = "expand" if where == TOP else f"{where}.expand"
        raise ApiError(422, "invalid_expression", f"'{name}' must be true or false",
                       input=name)
    evaluation = expression.prepare(body, maybe_bools, settings)
    # an expression case answers its value and gradients, but builds its nodes' first
    return Case(evaluation=evaluation, cost=evaluation.cost,
                answer=evaluation.prepared.answer_elements)


def prepare_case(case: Any, maybe_bools: bool, settings: Settings, where: str = TOP) -> Case:
    """Every check of one case, no compute; a refusal becomes the case's ``error``."""
    try:
        return _prepare(case, maybe_bools, settings, where)
    except ApiError as exc:
        return Case(error=exc)
    except InputError as exc:
        return Case(op=getattr(exc, "op", None), error=from_input_error(exc))
    except MemoryError:
        return Case(error=ApiError(413, "too_large", "the computation ran out of memory"))


def run_case(case: Case) -> Solved:
    """Compute a prepared case; its refusal (from `prepare_case` or the run) is raised."""
    if case.error is not None:
        raise case.error
    if case.call is not None:
        result, warnings = op_call.run(case.call.prepared)
        return Solved(case.op, result.value, result.grads, warnings)
    # the arrays themselves, not their wire JSON: a NaN's sign and payload survive to a
    # base64 answer (H3), and no array is written as JSON only to be read back
    answer = expression.run(case.evaluation, arrays=True)
    return Solved(None, answer["value"], answer["grads"], answer["warnings"])

"""One case, an op call or an expression, as the batch and check routes run it (issue 12).

A case is ``{"op": name, "inputs": {...}, "requires_grad": [...], "grad_output": ...}`` (the
body of ``POST /api/v1/ops/{name}`` with the op's name in it) or ``{"expression": ...,
"variables": {...}, "grad_output": ...}`` (the body of ``POST /api/v1/eval``). `solve` runs
one through the same path as those routes (`service.dispatch.compute_result`,
`service.routes.eval.evaluate_body`): the same validation, limits and errors.
`planned_work` is what a batch adds up before it computes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm import registry
from glassllm.expr import Builder, ExprError, _variables, parse
from glassllm.registry import LimitError
from glassllm.shapes import ShapeError
from glassllm.wire import ARRAY_KINDS, WireError, coerce
from service.dispatch import NUMPY_ERRORS, compute_result
from service.errors import ApiError
from service.routes.eval import evaluate_body, limits_of
from service.routes.ops import find
from service.settings import Settings

OP_FIELDS = ("op", "inputs", "requires_grad", "grad_output")
EXPRESSION_FIELDS = ("expression", "variables", "grad_output")


@dataclass
class Solved:
    """A case's answer as NumPy: ``op`` is None for an expression."""

    op: str | None
    value: np.ndarray
    grads: dict[str, np.ndarray]
    warnings: list[str]


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
        raise ApiError(422, "invalid_request", f"{where}: unknown field '{unknown[0][:40]}';"
                       f" the fields of an {kind} case are {', '.join(fields)}",
                       input=f"{where}.{unknown[0][:40]}")
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


def solve(case: Any, maybe_bools: bool, settings: Settings, where: str = "request body") -> Solved:
    """Run one case; every refusal is the ApiError its own route would answer.

    The one function both routes call for a single case: re-point it (not them) when the
    request path changes.
    """
    kind, body = split(case, where)
    if kind == "op":
        op = _find(body.pop("op"), where)
        result, warnings = compute_result(op, body, maybe_bools, settings)
        return Solved(op.name, result.value, result.grads, warnings)
    answer = evaluate_body(body, maybe_bools, settings)
    return Solved(None, coerce("tensor", "value", answer["value"]),
                  {k: coerce("tensor", k, v) for k, v in answer["grads"].items()},
                  answer["warnings"])


def planned_work(case: Any, maybe_bools: bool, settings: Settings, where: str) -> int:
    """The case's work before any compute: elements of its inputs, of its output and every
    planned intermediate, plus its matmul multiply-adds (forward + backward).

    A case that cannot be planned (its own error will be its answer) counts 0.
    """
    try:
        kind, body = split(case, where)
        if kind == "op":
            op = _find(body["op"], where)
            inputs = body.get("inputs")
            if not isinstance(inputs, dict):
                return 0
            args = registry.coerce_inputs(op, inputs, maybe_bools=maybe_bools,
                                          max_array_elements=settings.max_array_elements)
            plan = registry.plan(op, args)
            given = sum(int(np.size(args[i.name])) for i in op.inputs if i.kind in ARRAY_KINDS)
            return given + plan.size + sum(n for _, n in plan.sizes) + plan.madds
        builder = Builder(parse(body["expression"], limits_of(settings)),
                          _variables(body.get("variables")), limits_of(settings),
                          maybe_bools=maybe_bools)
        builder.expr(builder.p.tree.body)
        return builder.elements + builder.madds
    except (ApiError, ExprError, WireError, LimitError, ShapeError, *NUMPY_ERRORS):
        return 0

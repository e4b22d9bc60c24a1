"""The envelope of every request body: which fields it may hold, of which JSON type (H4).

Each kind of request declares its envelope here, as data, and every body goes through the
one checker `read` before any work: an object, no field it does not know, the fields it
needs. A refusal is a 422 ``invalid_request`` that names the field (``input``) and says
what to send. What the fields *mean* (an op's inputs, an expression's variables, a
claim's arrays) is checked after, by the library (`glassllm.sandbox.registry.prepare`,
`glassllm.sandbox.expr.prepare`) or by the request kind's own module.

The bodies of a batch and of a check hold *cases*: an op call or an expression, told
apart by `case_kind`, each checked as its own envelope (`OP_CASE`, `EXPRESSION_CASE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from glassllm.errors import echo_name
from glassllm.sandbox.registry import Op
from glassllm_service.http_errors import ApiError

TOP = "request body"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Envelope:
    """The fields one kind of body may hold.

    ``fields``: every field, in the order messages list them; ``required``: those it
    must hold; ``shape``: the sentence of the refusal of a body that is not an object;
    ``name``: what an unknown-field message calls a case of this kind (``"an op case"``),
    None for a whole body."""

    fields: tuple[str, ...]
    shape: str
    required: tuple[str, ...] = ()
    name: str | None = None


OP = Envelope(("inputs", "requires_grad", "grad_output", "encoding"),
              'the body must be a JSON object {"inputs": {...}, "requires_grad": [...],'
              ' "grad_output": ...}')
EXPRESSION = Envelope(("expression", "variables", "grad_output", "check", "encoding", "expand",
                       "paths", "dead"),
                      'the body must be a JSON object {"expression": "...", "variables":'
                      ' {...}, "grad_output": ..., "check": false}', required=("expression",))
BATCH = Envelope(("cases", "encoding"),
                 'the body must be {"cases": [...], "encoding": "json" | "base64"}',
                 required=("cases",))
CLAIM = ("claimed", "rtol", "atol", "digits", "reveal")  # what a check adds to its case
CHECK = Envelope((), "the body must be a JSON object: a case plus " + ", ".join(CLAIM))
OP_CASE = Envelope(("op", "inputs", "requires_grad", "grad_output"), "", name="an op case")
EXPRESSION_CASE = Envelope(("expression", "variables", "grad_output", "expand"), "",
                           name="an expression case")
# eval's own options: a case's answer has no place for them
EVAL_ONLY = ("check", "encoding", "paths", "dead")


def read(body: Any, kind: Envelope, *, where: str = TOP, op: str | None = None) -> dict:
    """`body` once it is an object holding only `kind`'s fields and every required one.

    `where` names the body in messages (``cases[3]`` for a case of a batch); `op` is the
    op the path named, so that every refusal names it. Raises `ApiError` 422.
    """
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", kind.shape, op=op, input=where)
    if kind.fields:
        unknown = sorted(set(body) - set(kind.fields))
        if unknown:
            raise _unknown(unknown[0], kind, where, op)
    for name in kind.required:
        if name not in body:
            raise ApiError(422, "invalid_request", f"'{name}' is required", op=op, input=name)
    return body


def _unknown(field: str, kind: Envelope, where: str, op: str | None) -> ApiError:
    name = echo_name(field)
    if kind.name is None:                     # a whole body
        return ApiError(422, "invalid_request", f"unknown field '{name}'; the fields are"
                        f" {', '.join(kind.fields)}", op=op, input=name)
    own = (f" ('{field}' is /api/v1/eval's own option)"
           if kind is EXPRESSION_CASE and field in EVAL_ONLY else "")
    return ApiError(422, "invalid_request", f"{where}: unknown field '{name}'; the fields of"
                    f" {kind.name} are {', '.join(kind.fields)}{own}", input=f"{where}.{name}")


def op_fields(op: Op, body: Any) -> tuple[dict, list[str] | None, Any]:
    """An op call's envelope (`OP`), its fields typed: ``inputs`` an object,
    ``requires_grad`` a list of names or null. Returns (inputs, requires_grad,
    grad_output); the encoding is read by `glassllm_service.codec.encoding_of`."""
    inputs = read(body, OP, op=op.name).get("inputs")
    if not isinstance(inputs, dict):          # missing too: the message lists the inputs
        raise ApiError(422, "invalid_request", "'inputs' must be an object of input name →"
                       " value; inputs of " + op.name + ": "
                       + ", ".join(i.name for i in op.inputs), op=op.name, input="inputs")
    rg = body.get("requires_grad")
    if rg is not None and not (isinstance(rg, list) and all(isinstance(n, str) for n in rg)):
        raise ApiError(422, "invalid_request", "'requires_grad' must be a list of input names"
                       " or null", op=op.name, input="requires_grad")
    return inputs, rg, body.get("grad_output")


def case_kind(case: Any, where: str) -> tuple[Envelope, dict]:
    """Which case `case` is (`OP_CASE` or `EXPRESSION_CASE`) and a copy of it, its fields
    checked. Raises `ApiError` 422 naming `where` (``cases[3]``, ``request body``) when it
    is neither, or has a field that belongs to neither."""
    if not isinstance(case, dict) or ("op" in case) == ("expression" in case):
        raise ApiError(422, "invalid_request", f"{where} must be an object with either \"op\""
                       " (and inputs, requires_grad, grad_output) or \"expression\" (and"
                       " variables, grad_output)", input=where)
    kind = OP_CASE if "op" in case else EXPRESSION_CASE
    read(case, kind, where=where)
    if kind is OP_CASE and not isinstance(case["op"], str):
        raise ApiError(422, "invalid_request", f"{where}: 'op' must be an op name",
                       input=f"{where}.op")
    return kind, dict(case)


def cases(body: Any) -> list:
    """A batch's envelope (`BATCH`): its list of cases."""
    if not isinstance(body, dict) or not isinstance(body.get("cases"), list):
        raise ApiError(422, "invalid_request", BATCH.shape, input="cases")
    return read(body, BATCH)["cases"]


def model(cls: type[M], body: Any) -> M:
    """A body read by a pydantic model (the training endpoints): its first complaint as a
    422 naming the field."""
    try:
        return cls.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or TOP
        raise ApiError(422, "invalid_request", f"{where}: {first['msg']}", input=where) from None

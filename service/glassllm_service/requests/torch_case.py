"""Copy as PyTorch, ``POST /api/v1/torch``: one case (an op call or an expression, as a
batch or a check holds it) computed as its own route would, answered as a PyTorch script
that recomputes the value and every gradient and compares them with the sandbox's
numbers written into it (`glassllm.sandbox.torch_script`). The page's "Copy as PyTorch"
sends the case on screen; the client writes the same script itself
(``Sandbox.torch_script``).

The script holds the case's numbers, so it is held to what eval is held to: an open
exercise's hidden op on the student's numbers is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from glassllm.course import Hidden
from glassllm.errors import echo_name
from glassllm.sandbox import registry
from glassllm.sandbox.torch_script import ExportError, op_expression, script
from glassllm.sandbox.wire import coerce, is_base64
from glassllm_service.codec import dumps
from glassllm_service.course_state import CourseState
from glassllm_service.http_errors import ApiError
from glassllm_service.requests.case import Case, prepare_case, run_case
from glassllm_service.settings import Settings

SEND = '{"op": ..., "inputs": ...} or {"expression": ..., "variables": ...}'
BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"type": "object", "properties": {
        "op": {"type": "string"}, "inputs": {"type": "object"},
        "requires_grad": {"anyOf": [{"type": "null"}, {"type": "array",
                                                       "items": {"type": "string"}}]},
        "expression": {"type": "string"}, "variables": {"type": "object"},
        "grad_output": {"anyOf": [{"type": "null"},
                                  {"$ref": "#/components/schemas/FloatArray"}]},
        "expand": {"type": "boolean"}}},
    "example": {"expression": "softmax(x).sum()", "variables": {"x": [[1.0, 2.0, 3.0]]}}}}}}


class TorchExport:
    """A case past every check, and the body it came from (its numbers, its names)."""

    __slots__ = ("body", "case", "maybe_bools")

    def __init__(self, case: Case, body: dict, maybe_bools: bool) -> None:
        self.case, self.body, self.maybe_bools = case, body, maybe_bools

    @property
    def cost(self) -> tuple[int, int]:
        return self.case.cost

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        err = course.refusal(self.case.uses(), hidden)
        if err is not None:
            raise err

    def answer(self) -> bytes:
        """Run in a worker thread, inside a compute slot: the case, then its script."""
        solved = run_case(self.case)
        body, grad_output = self.body, self.body.get("grad_output")
        seed = None if grad_output is None else coerce("tensor", "grad_output", grad_output,
                                                       maybe_bools=self.maybe_bools)
        try:
            if solved.op is not None:
                kinds = {i.name: i.kind for i in registry.OPS[solved.op].inputs}
                inputs = {name: self._array(kinds.get(name, "tensor"), name, v)
                          for name, v in (body.get("inputs") or {}).items()}
                text, found = op_expression(solved.op, inputs, kinds)
                named = {n: (v, kind, n in solved.grads) for n, (v, kind) in found.items()}
            else:
                text, named = body["expression"], {}
                for name, v in (body.get("variables") or {}).items():
                    raw = v["value"] if isinstance(v, dict) and "value" in v else v
                    kind = _kind_of(raw, name in solved.grads)
                    named[name] = (self._array(kind, name, raw), kind, name in solved.grads)
            out = script(text, named, solved.value, solved.grads, seed,
                         title=f"glassllm's {solved.op or 'expression'}")
        except ExportError as exc:
            raise ApiError(422, "not_exportable", str(exc), op=solved.op) from None
        return dumps({"script": out, "filename": f"glassllm_{solved.op or 'expression'}.py"})

    def _array(self, kind: str, name: str, value: Any) -> Any:
        if kind == "index":
            raise ExportError(f"the input '{echo_name(name)}' is an index object, which this"
                              " exporter does not write as PyTorch")
        if kind in ("tensor", "array", "table", "int_array", "bool_mask"):
            return coerce(kind, name, value, maybe_bools=self.maybe_bools)
        return value


def _kind_of(raw: Any, has_grad: bool) -> str:
    """An expression variable's kind from its value: a mask of booleans, integer ids
    (no gradient), else a float tensor."""
    if is_base64(raw):
        dtype = str(raw.get("dtype", ""))
        return "bool_mask" if dtype == "bool" else "int_array" if dtype.startswith(
            "int") and not has_grad else "tensor"
    arr = np.asarray(raw, dtype=object)
    flat = list(arr.reshape(-1)) if arr.size else []
    if flat and all(isinstance(x, bool) for x in flat):
        return "bool_mask"
    if flat and not has_grad and all(isinstance(x, int) and not isinstance(x, bool)
                                     for x in flat):
        return "int_array"
    return "tensor"


def prepare(body: Any, maybe_bools: bool, settings: Settings) -> TorchExport:
    """Every check of the case, no compute."""
    case = prepare_case(body, maybe_bools, settings)
    if case.error is not None:
        raise case.error
    return TorchExport(case, body, maybe_bools)

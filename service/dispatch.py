"""One op request, start to finish, in a worker thread (SPEC H2, H4, H5, H6).

The envelope is read here; every other check is `glassllm.registry.prepare`'s: coerce
inputs, binary arrays decoded there after their declared size is checked (422 / 413) →
shape plan (400) → limits from shapes (413) → requires_grad and grad_output against the
planned shape (422). Then `run`: forward + backward with NumPy's floating-point warnings
captured for this request only → the answer, its arrays in the asked ``encoding``
(`service.codec`). The batch and check routes (`service.case`) call the same two steps.
"""

from __future__ import annotations

from typing import Any

from glassllm import float_warnings, registry
from glassllm.errors import InputError
from glassllm.float_warnings import FloatWarnings
from glassllm.registry import Op
from service.codec import computed, dumps, encoding_of
from service.errors import ApiError
from service.settings import Settings

FIELDS = ("inputs", "requires_grad", "grad_output", "encoding")


def parse_envelope(op: Op, body: Any) -> tuple[dict, list[str] | None, Any]:
    """The request object: {"inputs": {...}, "requires_grad": [...], "grad_output": ...,
    "encoding": "json" | "base64"} (the encoding is read by `service.codec.encoding_of`)."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the body must be a JSON object"
                       ' {"inputs": {...}, "requires_grad": [...], "grad_output": ...}',
                       op=op.name, input="request body")
    extra = sorted(set(body) - set(FIELDS))
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{extra[0]}'; the fields are"
                       f" {', '.join(FIELDS)}", op=op.name, input=extra[0])
    inputs = body.get("inputs")
    if not isinstance(inputs, dict):
        raise ApiError(422, "invalid_request", "'inputs' must be an object of input name →"
                       " value; inputs of " + op.name + ": "
                       + ", ".join(i.name for i in op.inputs), op=op.name, input="inputs")
    rg = body.get("requires_grad")
    if rg is not None and not (isinstance(rg, list) and all(isinstance(n, str) for n in rg)):
        raise ApiError(422, "invalid_request", "'requires_grad' must be a list of input names"
                       " or null", op=op.name, input="requires_grad")
    return inputs, rg, body.get("grad_output")


def prepare_body(op: Op, body: Any, maybe_bools: bool, settings: Settings) -> registry.Prepared:
    """The envelope, then `registry.prepare` under the service's one `Limits`: every check,
    no compute. A refusal is an `ApiError` or the library's `InputError` (its op named)."""
    try:
        inputs, requires_grad, grad_output = parse_envelope(op, body)
        return registry.prepare(op, inputs, requires_grad, grad_output, settings.limits,
                                maybe_bools=maybe_bools)
    except InputError as exc:
        exc.op = op.name
        raise


def run_prepared(prepared: registry.Prepared) -> tuple[registry.RunResult, list[str]]:
    """`registry.run` (compute only), with NumPy's float warnings of this run recorded."""
    fw = FloatWarnings()

    def forward_backward() -> registry.RunResult:
        with fw:
            return registry.run(prepared)

    try:
        result = float_warnings.run_recording(forward_backward, fw.messages)
    except InputError as exc:
        exc.op = prepared.op.name
        raise
    return result, fw.messages


def run_op_body(op: Op, body: Any, maybe_bools: bool, settings: Settings) -> bytes:
    """Run in a worker thread: `prepare` (every check), then `run` (compute only).

    A refusal is the library's `InputError` (named op and input), mapped to its status by
    the app's exception handlers (`service.errors`).
    """
    encoding = encoding_of(body, op.name)
    result, warnings = run_prepared(prepare_body(op, body, maybe_bools, settings))
    return dumps(computed(result.value, result.grads, warnings, encoding, op=op.name))

"""One op request, start to finish (SPEC H2, H4, H5, H6), in the library's two steps.

`prepare_body`: the envelope is read here; every other check is
`glassllm.sandbox.registry.prepare`'s: coerce inputs, binary arrays decoded there after their
declared size is checked (422 / 413) → shape plan (400) → limits from shapes (413) →
requires_grad and grad_output against the planned shape (422). Its `Prepared.cost` is what
the request waits for a slot with (glassllm_service/admission.py).
`answer`, in a worker thread inside the slot: `run_prepared` (forward + backward with
NumPy's floating-point warnings captured for this request only) → the response bytes, its
arrays in the asked ``encoding`` (`glassllm_service.codec`). The batch and check routes
(`glassllm_service.requests.case`) call the same two steps.
"""

from __future__ import annotations

from typing import Any

from glassllm.errors import InputError, echo_name
from glassllm.sandbox import float_warnings, registry
from glassllm.sandbox.float_warnings import FloatWarnings
from glassllm.sandbox.registry import Op, Prepared
from glassllm_service.body import check_answer
from glassllm_service.codec import computed, dumps
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

FIELDS = ("inputs", "requires_grad", "grad_output", "encoding")


def parse_envelope(op: Op, body: Any) -> tuple[dict, list[str] | None, Any]:
    """The request object: {"inputs": {...}, "requires_grad": [...], "grad_output": ...,
    "encoding": "json" | "base64"} (the encoding is read by
    `glassllm_service.codec.encoding_of`)."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the body must be a JSON object"
                       ' {"inputs": {...}, "requires_grad": [...], "grad_output": ...}',
                       op=op.name, input="request body")
    extra = sorted(set(body) - set(FIELDS))
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{echo_name(extra[0])}'; the"
                       f" fields are {', '.join(FIELDS)}", op=op.name, input=echo_name(extra[0]))
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


def prepare_body(op: Op, body: Any, maybe_bools: bool, settings: Settings) -> Prepared:
    """The envelope, then `glassllm.sandbox.registry.prepare` under the service's one
    `Limits`: every check, no compute; the result's ``cost`` (elements, multiply-adds)
    decides the admission lane (glassllm_service/admission.py).

    A refusal is the library's `InputError` (named op and input), mapped to its status by
    the app's exception handlers (`glassllm_service.http_errors`).
    """
    try:
        inputs, requires_grad, grad_output = parse_envelope(op, body)
        prepared = registry.prepare(op, inputs, requires_grad, grad_output, settings.limits,
                                    maybe_bools=maybe_bools)
    except InputError as exc:
        exc.op = op.name
        raise
    check_answer(prepared.answer_elements, settings, what=f"{op.name}'s value and gradients",
                 input=", ".join(prepared.plan.blame), op=op.name)
    return prepared


def run_prepared(prepared: Prepared) -> tuple[registry.RunResult, list[str]]:
    """`glassllm.sandbox.registry.run` (compute only), with NumPy's float warnings of this run."""
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


def answer(prepared: Prepared, encoding: str) -> bytes:
    """Run in a worker thread, inside a compute slot: the response bytes of one op call."""
    result, warnings = run_prepared(prepared)
    return dumps(computed(result.value, result.grads, warnings, encoding, op=prepared.op.name))

"""One op call, ``POST /api/v1/ops/{name}`` (SPEC H2, H4, H5, H6): envelope, prepare, run.

`prepare`: the envelope (`glassllm_service.envelope.op_fields`), then every other check
in `glassllm.sandbox.registry.prepare`: coerce the inputs (binary arrays decoded after
their declared size is checked: 422 / 413) → shape plan (400) → limits from shapes (413)
→ requires_grad and grad_output against the planned shape (422). No compute; the
`OpCall`'s ``cost`` is what the request waits for a compute slot with
(`glassllm_service.admission`).

`OpCall.answer`, inside the slot: `run` (forward + backward, NumPy's floating-point
warnings captured for this request only) → the response bytes, arrays in the asked
``encoding`` (`glassllm_service.codec`). A case of a batch or a check
(`glassllm_service.requests.case`) goes through the same `prepare` and `run`.
"""

from __future__ import annotations

import difflib
from typing import Any

from glassllm.course import Hidden
from glassllm.errors import InputError, echo_name
from glassllm.sandbox import float_warnings, registry
from glassllm.sandbox.float_warnings import FloatWarnings
from glassllm.sandbox.registry import Op, Prepared
from glassllm.sandbox.registry.closure import runs
from glassllm_service.body import check_answer
from glassllm_service.codec import computed, dumps, encoding_of
from glassllm_service.course_state import CourseState, Uses
from glassllm_service.envelope import op_fields
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

SEND = '{"inputs": {...}}'          # what an empty body is told to send


def find(name: str) -> Op:
    """The registry's op of that name; else 404 ``unknown_op`` naming the close ones."""
    op = registry.get(name)
    if op is None:
        close = difflib.get_close_matches(name, list(registry.OPS), n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "."
        raise ApiError(404, "unknown_op", f"there is no op named {echo_name(name, 60)!r}{hint}"
                       " Every op: GET /api/v1/ops", input="name", close=close)
    return op


class OpCall:
    """An op call past every check: its `Prepared` request and the answer's encoding."""

    __slots__ = ("encoding", "prepared")

    def __init__(self, prepared: Prepared, encoding: str) -> None:
        self.prepared, self.encoding = prepared, encoding

    @property
    def cost(self) -> tuple[int, int]:
        """Planned (elements, multiply-adds): the admission lane (`Prepared.cost`)."""
        return self.prepared.cost

    def uses(self) -> Uses:
        """What it runs, for the open exercises' hiding (docs/modes.md): the op's closure
        (``linear`` runs ``matmul``), on numbers the student chose."""
        return Uses(runs([self.prepared.op.name]))

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        """Refused (403) while an open exercise hides the expected numbers of an op it
        runs."""
        err = course.refusal(self.uses(), hidden)
        if err is not None:
            raise err

    def answer(self) -> bytes:
        """Run in a worker thread, inside a compute slot: the response bytes."""
        result, warnings = run(self.prepared)
        return dumps(computed(result.value, result.grads, warnings, self.encoding,
                              op=self.prepared.op.name))


def prepare(op: Op, body: Any, maybe_bools: bool, settings: Settings) -> OpCall:
    """The envelope, then `glassllm.sandbox.registry.prepare` under the service's one
    `Limits`: every check, no compute.

    A refusal is the library's `InputError` (named op and input), mapped to its status by
    the app's exception handlers (`glassllm_service.http_errors`), or an `ApiError`.
    """
    encoding = encoding_of(body, op.name)
    try:
        inputs, requires_grad, grad_output = op_fields(op, body)
        prepared = registry.prepare(op, inputs, requires_grad, grad_output, settings.limits,
                                    maybe_bools=maybe_bools)
    except InputError as exc:
        exc.op = op.name
        raise
    check_answer(prepared.answer_elements, settings, what=f"{op.name}'s value and gradients",
                 input=", ".join(prepared.plan.blame), op=op.name)
    return OpCall(prepared, encoding)


def run(prepared: Prepared) -> tuple[registry.RunResult, list[str]]:
    """`glassllm.sandbox.registry.run` (compute only), with NumPy's float warnings of this
    run."""
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

"""One op request, start to finish, in a worker thread (SPEC H2, H4, H5, H6).

coerce inputs (422) → shape plan (NumPy's errors: 400) → limits from shapes (413) →
grad_output checked against the planned shape (422) → forward + backward with NumPy's
floating-point warnings captured for this request only → the response bytes.
"""

from __future__ import annotations

from typing import Any

from glassllm import registry
from glassllm.expr import FloatWarnings
from glassllm.registry import LimitError, Op
from glassllm.shapes import ShapeError
from glassllm.wire import WireError, coerce
from service import numpy_warnings
from service.codec import dumps, encode_as
from service.errors import ApiError
from service.settings import Settings

NUMPY_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)


def parse_envelope(op: Op, body: Any) -> tuple[dict, list[str] | None, Any]:
    """The request object: {"inputs": {...}, "requires_grad": [...], "grad_output": ...}."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the body must be a JSON object"
                       ' {"inputs": {...}, "requires_grad": [...], "grad_output": ...}',
                       op=op.name, input="request body")
    extra = sorted(set(body) - {"inputs", "requires_grad", "grad_output", "encoding"})
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{extra[0]}'; the fields are"
                       " inputs, requires_grad, grad_output, encoding", op=op.name,
                       input=extra[0])
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


def compute(op: Op, body: Any, maybe_bools: bool, settings: Settings) -> bytes:
    """Run in a worker thread; raises ApiError for every refusal."""
    encoding = encoding_of(body, op.name)
    result, warnings = compute_result(op, body, maybe_bools, settings)
    return dumps(answer(op.name, result, warnings, encoding))


def encoding_of(body: Any, op: str | None = None) -> str:
    """The body's ``"encoding"``: ``"json"`` (default) or ``"base64"`` (issue 12)."""
    encoding = body.get("encoding", "json") if isinstance(body, dict) else "json"
    if encoding not in ("json", "base64"):
        raise ApiError(422, "invalid_request", "'encoding' must be \"json\" or \"base64\"",
                       op=op, input="encoding")
    return encoding


def answer(op: str, result: registry.OpResult, warnings: list[str], encoding: str) -> dict:
    """The answer object of one op call (H2), arrays in the asked `encoding`."""
    return {"op": op, "value": encode_as(result.value, encoding),
            "shape": list(result.value.shape),
            "grads": {name: encode_as(grad, encoding) for name, grad in result.grads.items()},
            "warnings": warnings}


def compute_result(op: Op, body: Any, maybe_bools: bool,
                   settings: Settings) -> tuple[registry.OpResult, list[str]]:
    """One op call, start to finish: the NumPy result and the warnings; ApiError refuses."""
    try:
        inputs, requires_grad, grad_output = parse_envelope(op, body)
        args = registry.coerce_inputs(op, inputs, maybe_bools=maybe_bools,
                                      max_array_elements=settings.max_array_elements)
        try:
            plan = registry.plan(op, args)
        except (WireError, LimitError):
            raise
        except NUMPY_ERRORS as exc:
            raise numpy_error(op, inputs, exc) from None
        registry.check_limits(plan, max_result_elements=settings.max_result_elements,
                              max_matmul_madds=settings.max_matmul_madds)
        # registry.run repeats these cheap checks for offline callers; here they run first
        # so a bad requires_grad or grad_output is refused before any forward work.
        wanted = registry.check_requires_grad(op, requires_grad)
        registry.check_grad_output_has_a_backward(op, wanted, grad_output)
        g = None
        if grad_output is not None:
            g = coerce("tensor", "grad_output", grad_output, maybe_bools=maybe_bools,
                       max_elements=settings.max_result_elements)
            if g.shape != plan.shape:
                raise WireError("grad_output", f"has shape {list(g.shape)} but the output of"
                                f" {op.name} has shape {list(plan.shape)}")
        fw = FloatWarnings()

        def forward_backward():
            with fw:
                try:
                    return registry.run(op, args, requires_grad, g)
                except (WireError, LimitError):
                    raise
                except NUMPY_ERRORS as exc:
                    raise numpy_error(op, inputs, exc) from None

        result = numpy_warnings.run_recording(forward_backward, fw.messages)
        warnings = fw.messages
    except WireError as exc:
        raise ApiError(422, "invalid_input", str(exc), op=op.name, input=exc.input) from None
    except LimitError as exc:
        raise ApiError(413, "too_large", str(exc), op=op.name, input=exc.input) from None
    except MemoryError:
        raise ApiError(413, "too_large", "the computation ran out of memory", op=op.name) from None
    return result, warnings


def numpy_error(op: Op, inputs: dict, exc: Exception) -> ApiError:
    """A NumPy shape / axis / broadcast / index error → 400 naming the op and its inputs.

    A `ShapeError` knows which input breaks the contract (``ffn_norm``, ``n_heads``): only
    that one is named, so the page shows the message beside it alone.
    """
    if isinstance(exc, ShapeError):
        return ApiError(400, "shape_error", f"{op.name}: {exc}", op=op.name, input=exc.input)
    names = [i.name for i in op.inputs if i.name in inputs]
    message = f"{op.name}({', '.join(names)}): {type(exc).__name__}: {exc}"
    return ApiError(400, "numpy_error", message, op=op.name, input=", ".join(names))

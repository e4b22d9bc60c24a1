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
from service.codec import dumps, encode_value
from service.errors import ApiError
from service.settings import Settings

NUMPY_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)


def parse_envelope(op: Op, body: Any) -> tuple[dict, list[str] | None, Any]:
    """The request object: {"inputs": {...}, "requires_grad": [...], "grad_output": ...}."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the body must be a JSON object"
                       ' {"inputs": {...}, "requires_grad": [...], "grad_output": ...}',
                       op=op.name, input="request body")
    extra = sorted(set(body) - {"inputs", "requires_grad", "grad_output"})
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{extra[0]}'; the fields are"
                       " inputs, requires_grad, grad_output", op=op.name, input=extra[0])
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
    return prepare(op, body, maybe_bools, settings).run()


class Prepared:
    """A request checked and planned, not yet computed: its `cost` (elements of the output
    and intermediates + matmul multiply-adds, from the shape plan) decides its admission
    lane (service/admission.py); `run()` computes and returns the response bytes."""

    def __init__(self, op: Op, inputs: dict, args: dict, requires_grad: list[str] | None,
                 g: Any, plan: registry.Plan):
        self.op, self.inputs, self.args, self.requires_grad, self.g = (op, inputs, args,
                                                                       requires_grad, g)
        self.cost = plan.size + sum(n for _, n in plan.sizes) + plan.madds

    def run(self) -> bytes:
        op, inputs = self.op, self.inputs
        fw = FloatWarnings()

        def forward_backward():
            with fw:
                try:
                    return registry.run(op, self.args, self.requires_grad, self.g)
                except (WireError, LimitError):
                    raise
                except NUMPY_ERRORS as exc:
                    raise numpy_error(op, inputs, exc) from None

        try:
            result = numpy_warnings.run_recording(forward_backward, fw.messages)
        except WireError as exc:
            raise ApiError(422, "invalid_input", str(exc), op=op.name, input=exc.input) from None
        except LimitError as exc:
            raise ApiError(413, "too_large", str(exc), op=op.name, input=exc.input) from None
        except MemoryError:
            raise ApiError(413, "too_large", "the computation ran out of memory",
                           op=op.name) from None
        return dumps({
            "op": op.name,
            "value": encode_value(result.value),
            "shape": list(result.value.shape),
            "grads": {name: encode_value(grad) for name, grad in result.grads.items()},
            "warnings": fw.messages,
        })


def prepare(op: Op, body: Any, maybe_bools: bool, settings: Settings) -> Prepared:
    """Coerce, plan and check a request (no forward work); raises ApiError for every
    refusal. Cheap next to `Prepared.run`: it runs before the request waits for a slot."""
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
            g = coerce("tensor", "grad_output", grad_output, maybe_bools=maybe_bools)
            if g.shape != plan.shape:
                raise WireError("grad_output", f"has shape {list(g.shape)} but the output of"
                                f" {op.name} has shape {list(plan.shape)}")
    except WireError as exc:
        raise ApiError(422, "invalid_input", str(exc), op=op.name, input=exc.input) from None
    except LimitError as exc:
        raise ApiError(413, "too_large", str(exc), op=op.name, input=exc.input) from None
    except MemoryError:
        raise ApiError(413, "too_large", "the computation ran out of memory", op=op.name) from None
    return Prepared(op, inputs, args, requires_grad, g, plan)


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

"""One request path for every caller (SPEC H2, H4, H5): `prepare` validates, `run` computes.

``prepare(op, inputs, requires_grad, grad_output, limits)`` does all the checking once:
coerce the wire inputs (`WireError`), plan the output shape with the op's shape rule
(`ShapeError`, NumPy's own errors as `ComputeError`), check the limits from shapes alone
(`LimitError`), check `requires_grad` and `grad_output` against the op and the planned
shape. It returns a `Prepared` request, whose `cost` (elements, multiply-adds) is known
before any compute. ``run(prepared)`` trusts it and only computes:
forward, then backward seeded with `grad_output`. The ops route, the eval route (one
prepare per expression node) and any later route call these two.

Every refusal is an `InputError` naming its input; this module knows no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from glassllm.errors import (
    ComputeError,
    InputError,
    LimitError,
    ShapeError,
    WireError,
    echo_name,
    op_message,
)
from glassllm.sandbox.limits import Limits
from glassllm.sandbox.registry.entry import NO_GRADIENT_RULE, PROBABILITY_OUTPUTS, Op, Plan
from glassllm.sandbox.wire import ARRAY_KINDS, coerce, encode_array
from glassllm.tensor import Tensor, no_grad

NUMPY_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)


@dataclass(frozen=True)
class Prepared:
    """A request past every check: coerced arguments, the plan, what to differentiate."""

    op: Op
    args: dict[str, Any]
    plan: Plan
    wanted: tuple[str, ...]                  # inputs whose gradient is returned
    grad_output: np.ndarray | None = None    # the backward's seed, shaped like the output
    given: tuple[str, ...] = ()              # the inputs the request named

    @property
    def cost(self) -> tuple[int, int]:
        """What the run will cost, known from its plan before any compute: (elements it
        builds — the output and every planned intermediate —, matmul multiply-adds of
        forward + backward)."""
        return self.plan.elements, self.plan.madds

    @property
    def answer_elements(self) -> int:
        """Elements of the arrays the run returns, known before any compute: the output
        and one gradient per requested input, shaped like it."""
        return self.plan.size + sum(int(np.size(self.args[name])) for name in self.wanted)


@dataclass
class RunResult:
    value: np.ndarray
    grads: dict[str, np.ndarray]


def coerce_inputs(op: Op, inputs: Mapping[str, Any], *, maybe_bools: bool = True,
                  max_array_elements: int | None = None) -> dict[str, Any]:
    """Wire values → Python / NumPy values, one input at a time (WireError names the input).

    `maybe_bools`: the JSON holds true / false somewhere (`glassllm.sandbox.wire`'s fast path).
    """
    unknown = sorted(set(inputs) - {i.name for i in op.inputs})
    if unknown:
        raise WireError(echo_name(unknown[0]), f"is not an input of {op.name}; its inputs are "
                                    + ", ".join(i.name for i in op.inputs))
    args: dict[str, Any] = {}
    for spec in op.inputs:
        if spec.name not in inputs:
            if spec.required:
                raise WireError(spec.name, f"is required by {op.name}")
            args[spec.name] = spec.default
            continue
        # a binary array is held to the limit by its declared shape, before decoding
        value = coerce(spec.kind, spec.name, inputs[spec.name], maybe_bools=maybe_bools,
                       max_elements=max_array_elements)
        if (max_array_elements is not None and spec.kind in ARRAY_KINDS
                and np.size(value) > max_array_elements):
            raise LimitError(spec.name, f"has {np.size(value)} elements; the limit is"
                                        f" {max_array_elements}")
        args[spec.name] = value
    return args


def compute_error(op: Op, names: Sequence[str], exc: Exception) -> ComputeError:
    """NumPy's shape / axis / broadcast / index error, naming the op and its inputs. A
    rule the library states for one input ("eps must be a finite number >= 0.0, ...")
    blames that input; an index out of bounds blames the one index-like input (``ids``,
    ``targets``, ``index``, a mask) when there is one, as the expression evaluator points
    at it."""
    blamed = list(names)
    first = str(exc).split(" ", 1)[0]
    if first in names and str(exc).startswith(f"{first} must "):
        blamed = [first]            # the library's checks (check_real, check_int) name it
    elif isinstance(exc, IndexError) and not isinstance(exc, np.exceptions.AxisError):
        kinds = {spec.name: spec.kind for spec in op.inputs}
        indices = [n for n in names if kinds.get(n) in ("index", "int_array", "bool_mask")]
        blamed = indices if len(indices) == 1 else blamed
    return ComputeError(", ".join(blamed),
                        f"{op.name}({', '.join(names)}): {type(exc).__name__}: {exc}")


def check_limits(plan: Plan, limits: Limits | None = None, **fields: int) -> None:
    """Refuse a plan over `limits` (fields may override single limits), naming the inputs."""
    limits = limits or Limits()
    if fields:
        limits = replace(limits, **fields)
    for names, n in ((", ".join(plan.blame), plan.size), *plan.sizes):
        if n > limits.max_result_elements:
            raise LimitError(names, f"would produce {n} elements; the limit is"
                                    f" {limits.max_result_elements} (SPEC H5)")
    if plan.madds > limits.max_matmul_madds:
        raise LimitError(plan.madds_blame, f"matmul would take {plan.madds} multiply-adds; the"
                                           f" limit is {limits.max_matmul_madds} (SPEC H5)")


def _wanted(op: Op, requires_grad: Sequence[str] | None) -> tuple[str, ...]:
    if requires_grad is None:
        return op.differentiable
    names = {i.name for i in op.inputs}
    for name in requires_grad:
        if name not in names:
            raise WireError("requires_grad", f"names '{echo_name(name)}', which is not an input of"
                                             f" {op.name}")
        if name not in op.differentiable:
            raise WireError("requires_grad", f"names '{echo_name(name)}', which is not"
                                             f" differentiable: {NO_GRADIENT_RULE}")
    return tuple(dict.fromkeys(requires_grad))


def _seed(op: Op, wanted: Sequence[str], grad_output: Any, shape: tuple[int, ...],
          maybe_bools: bool, wire: bool, max_elements: int | None = None) -> np.ndarray | None:
    """The backward's seed: refused when there is nothing to seed (H2) or its shape is not
    the planned output's (shapes written as JSON lists for a wire request, else tuples).
    A binary seed is held to `max_elements` (the output's limit) before it is decoded."""
    if grad_output is None:
        return None
    if op.output == "ndarray":
        raise WireError("grad_output", f"{op.name} returns an ndarray (L0.2): there is no"
                                       " backward to seed")
    if not wanted:
        raise WireError("grad_output", "no input requires grad (requires_grad is empty), so"
                                       " there is no backward to seed")
    if isinstance(grad_output, np.ndarray):               # a Python caller's array: no wire
        seed = np.asarray(grad_output, dtype=np.float64)
    else:
        seed = coerce("tensor", "grad_output", grad_output, maybe_bools=maybe_bools,
                      max_elements=max_elements)
    if seed.shape != tuple(shape):
        got, want = (list(seed.shape), list(shape)) if wire else (seed.shape, tuple(shape))
        raise WireError("grad_output", f"has shape {got} but the output of {op.name}"
                                       f" has shape {want}")
    return seed


def prepare_args(op: Op, args: dict[str, Any], requires_grad: Sequence[str] | None = None,
                 grad_output: Any = None, limits: Limits | None = None, *,
                 maybe_bools: bool = True, given: Sequence[str] | None = None) -> Prepared:
    """`prepare` for arguments already coerced (a notebook's, or `coerce_inputs`').

    `given`: the inputs a wire request named (a NumPy error names those); default all.
    """
    wire = given is not None
    given = tuple(i.name for i in op.inputs if i.name in args) if given is None else tuple(given)
    try:
        plan = op.plan(args)
    except ShapeError as exc:
        raise ShapeError(exc.input, op_message(op.name, str(exc))) from None
    except (InputError, MemoryError):
        raise
    except NUMPY_ERRORS as exc:
        raise compute_error(op, given, exc) from None
    if limits is not None:
        check_limits(plan, limits)
    wanted = _wanted(op, requires_grad)
    if isinstance(grad_output, np.generic | Tensor):
        grad_output = np.asarray(getattr(grad_output, "data", grad_output))
    seed = _seed(op, wanted, grad_output, plan.shape, maybe_bools, wire,
                 None if limits is None else limits.max_result_elements)
    return Prepared(op, args, plan, wanted, seed, given)


def prepare(op: Op, inputs: Mapping[str, Any], requires_grad: Sequence[str] | None = None,
            grad_output: Any = None, limits: Limits | None = None, *,
            maybe_bools: bool = True) -> Prepared:
    """Every check of one op request, once, before any compute.

    Args:
        inputs: input name → wire value (nested lists, "NaN", index JSON, …).
        requires_grad: the inputs whose gradient to return; None: every differentiable one.
        grad_output: the backward's seed, shaped like the output; None: ones (H2).
        limits: the bounds (H5); None checks none (a trusted offline caller).
        maybe_bools: a speed hint of `glassllm.sandbox.wire`; True unless the JSON holds no bools.

    Raises: `WireError`, `ShapeError`, `ComputeError`, `LimitError` (all `InputError`s),
    each naming its input.
    """
    max_elements = None if limits is None else limits.max_array_elements
    args = coerce_inputs(op, inputs, maybe_bools=maybe_bools, max_array_elements=max_elements)
    return prepare_args(op, args, requires_grad, grad_output, limits, maybe_bools=maybe_bools,
                        given=[i.name for i in op.inputs if i.name in inputs])


def run(prepared: Prepared | Op, args: dict[str, Any] | None = None,
        requires_grad: Sequence[str] | None = None, grad_output: Any = None) -> RunResult:
    """Forward, then backward from the seed (default ones: the gradient of the sum, H2).

    Takes a `Prepared` request and trusts it. ``run(op, args, requires_grad, grad_output)``
    is the offline shorthand: it prepares coerced `args` first (no limits). Tensors are
    made here, one per tensor input, so each call owns its graph (H6). NumPy errors of the
    compute itself are `ComputeError`.
    """
    if isinstance(prepared, Op):
        prepared = prepare_args(prepared, args or {}, requires_grad, grad_output)
    op, wanted = prepared.op, prepared.wanted
    call = []
    for spec in op.inputs:
        value = prepared.args[spec.name]
        if spec.kind == "tensor":
            value = Tensor(value, requires_grad=spec.name in wanted)
        call.append(value)
    try:
        if not wanted:
            with no_grad():
                return RunResult(_data(op.fn(*call)), {})
        out = op.fn(*call)
        value = _data(out)
        seed = np.ones(value.shape) if prepared.grad_output is None else prepared.grad_output
        out.backward(seed)
    except (InputError, MemoryError):
        raise
    except NUMPY_ERRORS as exc:
        raise compute_error(op, prepared.given, exc) from None
    grads = {}
    for spec, tensor in zip(op.inputs, call, strict=True):
        if spec.name in wanted:
            grad = tensor.grad                       # None: the output does not depend on it
            grads[spec.name] = grad if grad is not None else np.zeros_like(tensor.data)
    return RunResult(value, grads)


_ANSWERS: dict[tuple[str, int], dict] = {}


def example_answer(op: Op, index: int) -> dict:
    """``expected`` of the op's example `index`, complete: the numbers the example
    states (the reference's, SPEC Part L) and, for what it leaves out, the library's own
    value and gradients through `prepare` and `run`, computed once. Wire format; a test
    checks every gradient against central differences."""
    key = (op.name, index)
    if key not in _ANSWERS:
        example = op.examples[index]
        result = run(prepare(op, example.inputs, example.requires_grad, example.grad_output))
        computed: dict = {"value": encode_array(result.value)}
        if op.output == "tensor":
            computed["grads"] = {k: encode_array(g) for k, g in result.grads.items()}
        stated = example.expected
        answer = {**computed, **stated}
        if "grads" in computed:
            answer["grads"] = {**computed["grads"], **stated.get("grads", {})}
        _ANSWERS[key] = answer
    return _ANSWERS[key]


def describe(op: Op) -> dict:
    """The op as ``GET /api/v1/ops/{name}`` shows it: its inputs, outputs, backward rule and
    examples, each example with its complete answer (`example_answer`, computed through
    this request path). ``role`` says how to read the output: ``"probability"`` (every
    element in [0, 1]) gets a [0, 1] colour scale on the page (P3)."""
    role = "probability" if op.name in PROBABILITY_OUTPUTS else "value"
    return {"name": op.name, "summary": op.summary, "clause": op.clause,
            "module": op.module, "output": op.output, "role": role,
            "outputs": op.outputs(), "vjp": dict(op.vjp), "symbol": op.symbol,
            "sum_invariant": op.sum_invariant,
            "inputs": [i.describe() for i in op.inputs],
            "examples": [{**e.describe(), "expected": example_answer(op, i)}
                         for i, e in enumerate(op.examples)]}


def _data(out: Any) -> np.ndarray:
    return np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)

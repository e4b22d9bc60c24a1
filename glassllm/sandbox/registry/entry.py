"""What the registry holds per op (SPEC H1): its inputs, examples, shape plan and outputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from glassllm.sandbox.wire import ARRAY_KINDS

__all__ = ["DTYPES", "NO_GRADIENT_RULE", "REQUIRED", "Example", "Input", "Op", "Plan"]

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()

NO_GRADIENT_RULE = ("gradients flow to Tensors only, never to index selectors, masks, constant"
                    " exponents, repeat counts or trig tables (SPEC L0.6)")

# Every input kind of glassllm.sandbox.wire and the dtype it is read as; null: not an array.
DTYPES: dict[str, str | None] = {
    "tensor": "float64", "array": "float64", "table": "float64", "int_array": "int64",
    "bool_mask": "bool", "number": "float64", "int": "int64", "bool": "bool",
    "axis": None, "axes": None, "shape": None, "index": None}


@dataclass(frozen=True)
class Input:
    name: str
    kind: str                       # a kind of glassllm.sandbox.wire (tensor, int_array, axis, ...)
    doc: str
    differentiable: bool = False
    default: Any = REQUIRED
    shape: str | None = None        # glossary letters, e.g. "(N, V)"

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def dtype(self) -> str | None:
        return DTYPES.get(self.kind)

    def describe(self) -> dict:
        # "array": the value is a nested list (the page edits it as one; P1)
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype,
                "array": self.kind in ARRAY_KINDS,
                "differentiable": self.differentiable, "required": self.required,
                "default": None if self.required else self.default,
                "shape": self.shape, "doc": self.doc}


@dataclass(frozen=True)
class Example:
    """A runnable request; ``expected`` holds the reference's numbers when it states them."""

    title: str
    inputs: dict
    clause: str | None = None
    requires_grad: list | None = None
    grad_output: Any = None
    expected: dict = field(default_factory=dict)    # {"value": ..., "grads": {name: ...}}

    def request(self) -> dict:
        body: dict = {"inputs": self.inputs}
        if self.requires_grad is not None:
            body["requires_grad"] = self.requires_grad
        if self.grad_output is not None:
            body["grad_output"] = self.grad_output
        return body

    def describe(self) -> dict:
        return {"title": self.title, "clause": self.clause, "request": self.request(),
                "expected": self.expected}


@dataclass(frozen=True)
class Plan:
    """What an op will build, known before it runs (H5)."""

    shape: tuple[int, ...]                   # the output shape
    blame: tuple[str, ...]                   # the inputs named if the output is too big
    sizes: tuple[tuple[str, int], ...] = ()  # (inputs named, element count) of intermediates
    madds: int = 0                           # matmul multiply-adds, forward + backward
    madds_blame: str = ""
    summed: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Per tensor input, the axes its gradient is summed over (the op's shape rule, L0.5);
    an input not listed sums none."""

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def elements(self) -> int:
        """Elements the op builds: its output and every planned intermediate."""
        return self.size + sum(n for _, n in self.sizes)


PROBABILITY_OUTPUTS = frozenset({"softmax", "softmax_np", "sigmoid"})  # outputs in [0, 1]


@dataclass(frozen=True)
class Op:
    name: str
    fn: Callable
    summary: str
    clause: str
    inputs: tuple[Input, ...]
    plan: Callable[[dict], Plan]
    output: str = "tensor"                   # "tensor" or "ndarray" (L0.2)
    examples: tuple[Example, ...] = ()
    module: str = "glassllm.autograd"
    role: str = "value"                      # what the output is: "value" or "loss"
    vjp: dict[str, str] = field(default_factory=dict)
    """The backward rule per differentiable input: the `Backward:` block of fn's docstring
    (glassllm.sandbox.registry.vjp; the table fills it)."""
    symbol: str | None = None                # how a formula writes it: "×", "@", "Σ"
    sum_invariant: str | None = None         # why the gradient of its output's sum is 0
    stands_for: tuple[str, ...] = ()
    """Other ops whose math this op computes under its own name (cross_entropy_grad is
    cross_entropy's gradient; softmax_np is softmax on a plain array): what the sandbox's
    hiding counts as run with it (glassllm.sandbox.registry.closure). Each is held by a
    test of the numbers (tests/library/test_op_closure.py)."""

    @property
    def differentiable(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.differentiable)

    def outputs(self) -> list[dict]:
        """What a run returns: the value (its role: value or loss) and, for a tensor
        output, one gradient per differentiable input (role grad, ``of`` that input)."""
        out = [{"name": "value", "role": self.role, "kind": self.output}]
        if self.output == "tensor":
            out += [{"name": f"grads.{n}", "role": "grad", "of": n, "kind": "tensor"}
                    for n in self.differentiable]
        return out

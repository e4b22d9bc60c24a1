"""Which ops a computation runs: the one place the sandbox's hiding asks (docs/modes.md).

An op's *closure* is every registry op whose math runs when it runs. It is taken from
what the engine executes, not written by hand:

- **traced**: each op runs forward and backward on its registry examples, every input
  that can get a gradient requiring one, while a profile hook notes each registry op's
  function that is called — ``linear`` calls ``matmul``; ``transformer_block`` calls
  ``rms_norm``, ``attention`` (which calls ``linear``, ``rope``, ``repeat_kv``,
  ``masked_fill``, ``softmax``, ...) and ``swiglu`` — and the ops of the graph its result
  recorded are added: a fused node (`glassllm.fast.fused`) is named after the layer
  whose composed lines it stands for, so it counts as those lines;
- **declared**: `Op.stands_for`, the ops whose math an op computes under its own name
  with a kernel the hook cannot see (``cross_entropy_grad`` is ``cross_entropy``'s
  gradient, ``silu`` computes ``sigmoid``), each held by a test of the numbers;

then closed: an op runs whatever the ops it runs run. `traced` answers the same question
for any computation (a model's training step). Worked out once per process, on first use
(a few milliseconds), under a lock; `glassllm.sandbox.expr` adds what an expression's
``expand`` opens (`glassllm.sandbox.expr.PreparedExpression.runs`).

Example:
    >>> sorted(closure("linear"))
    ['linear', 'matmul']
    >>> {"rms_norm", "attention", "matmul", "softmax"} <= closure("transformer_block")
    True
    >>> runs(["linear", "add"])["matmul"]
    'linear'
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from glassllm.sandbox.registry.entry import Op
from glassllm.sandbox.registry.requests import coerce_inputs
from glassllm.sandbox.registry.table import OPS
from glassllm.tensor import Tensor

__all__ = ["closure", "graph_ops", "runners", "runs", "traced"]

_LOCK = threading.Lock()


@functools.cache
def _codes() -> dict[Any, str]:
    """Each registry op's function's code object → the op's name."""
    return {op.fn.__code__: op.name for op in OPS.values()}


def graph_ops(out: Any) -> frozenset[str]:
    """The op names of the graph that made `out` (a Tensor; anything else: none)."""
    found: set[str] = set()
    seen: set[int] = set()
    stack = [out] if isinstance(out, Tensor) else []
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.op:
            found.add(t.op)
        stack.extend(p for p in t._parents if isinstance(p, Tensor))
    return frozenset(found)


def traced(call: Callable[[], Any]) -> tuple[Any, frozenset[str]]:
    """Run `call` (in this thread) and return its result with every registry op it ran:
    each op whose function was called, and the ops of the graph of a Tensor it returns.
    `call` runs a backward itself if it should be counted."""
    codes = _codes()
    found: set[str] = set()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = codes.get(frame.f_code)
            if name is not None:
                found.add(name)

    before = sys.getprofile()
    sys.setprofile(hook)
    try:
        out = call()
    finally:
        sys.setprofile(before)
    return out, frozenset(found) | graph_ops(out)


def _run_example(op: Op, inputs: dict) -> Any:
    """`op` forward on an example's inputs, every differentiable input requiring grad,
    then backward from ones: the Tensor (or ndarray) it made."""
    args = coerce_inputs(op, inputs)
    call = [Tensor(args[i.name], requires_grad=True) if i.differentiable else args[i.name]
            for i in op.inputs]
    with np.errstate(all="ignore"):
        out = op.fn(*call)
        if isinstance(out, Tensor) and out.requires_grad:
            out.backward(np.ones(out.shape))
    return out


def _direct(op: Op) -> frozenset[str]:
    """The ops `op` itself runs on its examples, and those it declares it stands for."""
    found: set[str] = {op.name, *op.stands_for}
    for example in op.examples:
        found |= traced(lambda e=example: _run_example(op, e.inputs))[1]
    return frozenset(found)


@functools.cache
def _closures() -> dict[str, frozenset[str]]:
    with _LOCK:
        unknown = sorted({s for op in OPS.values() for s in op.stands_for} - set(OPS))
        if unknown:
            raise ValueError(f"stands_for names {unknown}, not ops of the registry")
        out = {name: _direct(op) for name, op in OPS.items()}
        changed = True
        while changed:                  # an op runs what the ops it runs run
            changed = False
            for name, ops in out.items():
                grown = ops.union(*(out[o] for o in ops if o in out))
                if grown != ops:
                    out[name], changed = grown, True
        return out


def closure(name: str) -> frozenset[str]:
    """Every registry op whose math runs when op `name` runs, `name` included; an unknown
    name (``variable``, ``detach``): just itself."""
    return _closures().get(name, frozenset({name}))


def runs(names: Iterable[str]) -> dict[str, str]:
    """Every op that running `names` runs → the first of `names` that runs it (a hidden
    op's refusal names the op of the request that brought it in)."""
    out: dict[str, str] = {}
    for name in names:
        for op in sorted(closure(name)):
            out.setdefault(op, name)
    return out


@functools.cache
def runners(name: str) -> frozenset[str]:
    """The registry ops whose closure holds `name`: what hiding `name` refuses."""
    return frozenset(op for op, ops in _closures().items() if name in ops)

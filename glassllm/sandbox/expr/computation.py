"""What an evaluation computes, as a course's hiding reads it (docs/modes.md): the ops it
runs, and its identity.

- `runs`: every registry op a prepared expression runs → the node's op that brings it in.
  Each node runs its op's closure (`glassllm.sandbox.registry.closure`: ``linear`` runs
  ``matmul``); with ``expand``, each composite node also runs its composition
  (`glassllm.sandbox.expr.expand`), whose nodes run theirs in turn (a transformer block
  opens its attention). Checks, paths and the dead-gradient report run the same graph
  again, so they add no op.
- `fingerprint`: a digest of exactly what the evaluation computes on which numbers — every
  node's op, its literal arguments and its inputs, every variable's name, kind, shape,
  dtype, bits and ``requires_grad`` as the graph reads them, the variables' names in the
  order the request gave them (an unused one too), and the seed (``grad_output``, or
  none). Two requests with the same fingerprint compute the same numbers; spaces in the
  expression, an array sent as base64 rather than a list, or ``requires_grad`` said where
  it is the default change nothing; a changed number, another name, a variable added or
  moved, another ``grad_output`` (given where the other gives none included), another
  argument, change it. ``check``, ``expand``, ``paths``, ``dead`` and ``encoding`` are
  not part of it: they say what to report of the same numbers.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import numpy as np

from glassllm.sandbox import registry
from glassllm.sandbox.expr.evaluation import PreparedExpression, prepare
from glassllm.sandbox.expr.expand import COMPOSITIONS, composition
from glassllm.sandbox.expr.graph import IndexArg, LiteralArg, NodeArg
from glassllm.sandbox.expr.parser import CUTS
from glassllm.sandbox.registry.closure import closure

__all__ = ["fingerprint", "opened", "runs"]

LEAVES = ("variable", "constant", *CUTS)


@functools.cache
def opened(op_name: str) -> frozenset[str]:
    """The ops ``expand`` runs to open a node of composite `op_name` (empty for any other
    op): its composition's ops, built on the op's first registry example, each with its
    closure and, for a composite among them, what opening it runs."""
    if op_name not in COMPOSITIONS:
        return frozenset()
    op = registry.OPS[op_name]
    args = registry.coerce_inputs(op, op.examples[0].inputs)
    built = composition(op_name, args, {i.name: i.differentiable for i in op.inputs})
    assert built is not None
    inner = prepare(*built)
    found: set[str] = set()
    for n in inner.nodes:
        if n.op not in LEAVES:
            found |= closure(n.op) | opened(n.op)
    return frozenset(found)


def runs(prepared: PreparedExpression) -> dict[str, str]:
    """Every registry op `prepared` runs → the op of the node that brings it in (the
    first, in evaluation order)."""
    out: dict[str, str] = {}
    seen: set[str] = set(LEAVES)
    for n in prepared.nodes:
        if n.op in seen:            # each op once: a graph repeats few ops many times
            continue
        seen.add(n.op)
        for op in closure(n.op):
            out.setdefault(op, n.op)
        if prepared.expand:
            for op in opened(n.op):
                out.setdefault(op, n.op)
    return out


def _put(h: Any, value: Any) -> None:
    """Feed `value` to the digest unambiguously: a tag, then its bytes."""
    if isinstance(value, np.ndarray | np.generic):
        arr = np.ascontiguousarray(value)
        h.update(b"A" + arr.dtype.str.encode() + repr(arr.shape).encode() + b":")
        h.update(arr.tobytes() if arr.dtype != object else repr(arr.tolist()).encode())
    elif isinstance(value, list | tuple):
        h.update(b"L" if isinstance(value, list) else b"T")
        h.update(str(len(value)).encode() + b":")
        for item in value:
            _put(h, item)
    elif isinstance(value, dict):
        h.update(b"D" + str(len(value)).encode() + b":")
        for k, v in value.items():
            _put(h, k)
            _put(h, v)
    elif isinstance(value, slice):
        h.update(b"S")
        for part in (value.start, value.stop, value.step):
            _put(h, part)
    else:       # None, bool, int, float (repr is exact), str, Ellipsis
        text = repr(value).encode()
        h.update(b"V" + type(value).__name__.encode() + b":" + str(len(text)).encode()
                 + b":" + text)


def fingerprint(prepared: PreparedExpression) -> bytes:
    """The SHA-256 of what `prepared` computes on which numbers (the module docstring)."""
    h = hashlib.sha256(b"glassllm-expression-1")
    _put(h, list(prepared.given))
    for n in prepared.nodes:
        _put(h, (n.op, n.kind, n.name, tuple(n.shape), n.requires_grad))
        if n.op in ("variable", "constant"):
            _put(h, np.asarray(n.value))
        for arg in n.args:
            if isinstance(arg, NodeArg):
                _put(h, ("node", arg.id))
            elif isinstance(arg, LiteralArg):
                _put(h, ("literal", arg.value))
            elif isinstance(arg, IndexArg):
                _put(h, ("index", arg.index, arg.refs))
    _put(h, ("out", prepared.out_id))
    _put(h, None if prepared.seed is None else np.asarray(prepared.seed, dtype=np.float64))
    return h.digest()

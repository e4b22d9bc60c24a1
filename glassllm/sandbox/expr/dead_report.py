"""An evaluation's ``dead``: every variable whose gradient is missing or dead, and why.

The library's `glassllm.gradients.dead_gradients` walks the recorded tensors and blames
the op where each dead element's path was cut (a ReLU that is off, the untaken branch of
``where``, a masked position, max's losers, a softmax's symmetry, ...). The expression
graph adds what the recorded tensors cannot show: which ``detach(...)`` or
``no_grad(...)`` node cut a variable off, which variable was sent with ``requires_grad``
false, and which inputs are integers or booleans (ids, targets, masks, conditions).

Answered as ``"dead": [{"variable", "node", "shape", "dead", "size", "missing", "rows",
"causes": [{"reason", "words", "op", "node", "elements", "units"}]}]``: ``node`` is the
expression node of the variable, and in a cause the node where the path was cut (null
when the cut lies inside a composite op such as attention, whose inner tensors are not
nodes of the expression; ``op`` still names it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from glassllm.gradients.dead import REASONS, DeadCause, DeadGradient, dead_gradients
from glassllm.sandbox.expr.graph import Node
from glassllm.sandbox.expr.parser import CUTS
from glassllm.tensor import Tensor

__all__ = ["report"]

_KIND_REASON = {"int_array": "integer_input", "int": "integer_input",
                "bool_mask": "boolean_input"}


def report(nodes: list[Node], vals: list[Any], out: Tensor, seed: np.ndarray | None) -> list[dict]:
    """The ``dead`` answer, in the variables' order of first use."""
    variables = [n for n in nodes if n.op == "variable"]
    node_of = {id(v): i for i, v in enumerate(vals) if isinstance(v, Tensor)}
    walked: dict[str, DeadGradient] = {}
    if out.requires_grad:
        leaves = {n.name: vals[n.id] for n in variables
                  if n.kind == "tensor" and n.requires_grad}
        walked = {d.name: d for d in dead_gradients(out, leaves, seed)}
    entries = []
    for n in variables:
        cut = None
        if n.kind == "tensor" and n.requires_grad:
            found = walked.get(n.name)
            if found is None:
                continue
            if found.causes[0].reason == "not_connected":
                found, cut = _cut_off(n, nodes, found)
        elif n.kind == "tensor":
            found = _whole(n, "requires_grad_false")
        else:
            found = _whole(n, _KIND_REASON.get(n.kind, "constant_input"))
        entries.append(_entry(n, found, node_of, cut))
    return entries


def _whole(n: Node, reason: str) -> DeadGradient:
    shape = tuple(np.shape(n.value))
    size = int(np.prod(shape))
    return DeadGradient(n.name, shape, size, size, True, (DeadCause(reason, None, None, size),),
                        shape[0] if len(shape) == 2 else None)


def _cut_off(var: Node, nodes: list[Node], found: DeadGradient
             ) -> tuple[DeadGradient, int | None]:
    """A variable that requires grad but is not in the output's graph: the detach or
    no_grad node that cut it off (the first, in evaluation order), if one did."""
    reads: list[set[int]] = []
    for n in nodes:
        reads.append({n.id} | set().union(*(reads[i] for i in n.inputs)) if n.inputs
                     else {n.id})
    for n in nodes:
        if n.op in CUTS and var.id in reads[n.id]:
            cause = DeadCause("no_grad" if n.op == "no_grad" else "detached", n.op, None,
                              found.size)
            return DeadGradient(found.name, found.shape, found.dead, found.size, True,
                                (cause,), found.rows), n.id
    return found, None


def _entry(n: Node, d: DeadGradient, node_of: dict[int, int], cut: int | None) -> dict:
    causes = []
    for c in d.causes:
        at = cut if c.node is None else node_of.get(id(c.node))
        causes.append({"reason": c.reason, "words": REASONS[c.reason], "op": c.op, "node": at,
                       "elements": c.elements, "units": c.units})
    return {"variable": n.name, "node": n.id, "shape": list(d.shape), "dead": d.dead,
            "size": d.size, "missing": d.missing, "rows": d.rows, "causes": causes}


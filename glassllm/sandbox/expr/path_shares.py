"""An evaluation's ``paths``: each shared node's gradient, split by the edges it leaves by.

A node read by more than one op input (``embedding(w, ids) @ w.T``: w is read by embedding
and by the transpose of the output head; ``x + block(x)``: x by the skip and the block;
``tanh(x) * sigmoid(x)``: a diamond), or by ``repeat_kv`` (one K/V head for several
query heads), gets one entry per *consumer edge*: what that op hands that input, the op's
vector-Jacobian product for it given the op's whole incoming gradient. The parts add up
to the node's gradient (to rounding: the engine adds the same arrays, maybe in another
order).

Each part comes from the expression evaluator: the consuming op is run once more on
fresh leaves (one per tensor input, so ``x * x`` gives x two edges) and its backward
given the node's gradient. The library's own split, `glassllm.gradients.path_shares`,
walks the recorded tensors instead; an expression's node may be a whole layer
(attention), whose inner tensors are not its edges.

Answered as ``"paths": [{"node": id, "edges": [{"consumer", "input", "slot", "grad",
"norm", "share"}, ...]}]``: ``share`` is <part, total> / <total, total> (the shares add up
to 1; null when the total is 0), ``norm`` the part's Euclidean norm. A ``repeat_kv`` edge
adds ``heads``: per query head h, the part it hands K/V head h // repeats, its norm and
its share of that head's gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from glassllm.sandbox import registry
from glassllm.sandbox.expr.graph import Node, NodeArg
from glassllm.sandbox.wire import encode_array

__all__ = ["answer_elements", "consumer_edges", "report"]

Edge = tuple[int, int, str]          # (consumer node id, slot among its op's inputs, name)


def consumer_edges(nodes: list[Node]) -> dict[int, list[Edge]]:
    """The shared nodes' edges: node id → [(consumer, slot, input name)], for nodes that
    require grad and are read by more than one tensor input, or by repeat_kv."""
    edges: dict[int, list[Edge]] = {}
    for n in nodes:
        if n.op not in registry.OPS:          # a variable, a constant, detach / no_grad
            continue
        for slot, (spec, arg) in enumerate(zip(registry.OPS[n.op].inputs, n.args, strict=True)):
            if isinstance(arg, NodeArg) and spec.kind == "tensor" and nodes[arg.id].requires_grad:
                edges.setdefault(arg.id, []).append((n.id, slot, spec.name))
    return {i: e for i, e in edges.items()
            if len(e) > 1 or any(nodes[c].op == "repeat_kv" for c, _, _ in e)}


def answer_elements(nodes: list[Node]) -> int:
    """Elements of the arrays ``paths`` answers, from the plan: a part per edge, shaped
    like its node, and a repeat_kv edge's heads, shaped like its output."""
    total = 0
    for i, edges in consumer_edges(nodes).items():
        total += len(edges) * math.prod(nodes[i].shape)
        total += sum(math.prod(nodes[c].shape) for c, _, _ in edges if nodes[c].op == "repeat_kv")
    return total


def report(nodes: list[Node], grads_of: list[Any],
           parts_of: Callable[[Node], dict[int, np.ndarray]]) -> list[dict]:
    """The ``paths`` answer. `grads_of[i]` is node i's gradient (None where none flows);
    `parts_of(consumer)` runs the consumer again and gives, per slot, what it hands that
    input (the evaluator's)."""
    done: dict[int, dict[int, np.ndarray]] = {}
    out = []
    for i, edges in consumer_edges(nodes).items():
        total = grads_of[i]
        if total is None:
            continue
        entry = []
        for c, slot, name in edges:
            if grads_of[c] is None:          # nothing flows back through this consumer
                continue
            if c not in done:
                done[c] = parts_of(nodes[c])
            part = done[c][slot]
            edge = {"consumer": c, "input": name, "slot": slot, "grad": encode_array(part),
                    **_size(part, total)}
            if nodes[c].op == "repeat_kv":
                edge["heads"] = _heads(grads_of[c], part)
            entry.append(edge)
        out.append({"node": i, "edges": entry})
    return out


def _size(part: np.ndarray, total: np.ndarray) -> dict:
    """A part's norm, and its share of `total`: <part, total> / <total, total>."""
    with np.errstate(all="ignore"):
        norm2 = float(np.sum(total * total))
        share = float(np.sum(part * total)) / norm2 if norm2 > 0 and math.isfinite(norm2) else None
        norm = float(np.linalg.norm(part.reshape(-1)))
    return {"norm": encode_array(np.float64(norm)),
            "share": None if share is None else encode_array(np.float64(share))}


def _heads(g: np.ndarray, part: np.ndarray) -> list[dict]:
    """repeat_kv's incoming gradient g (B, H, n, dk) by query head: head h's part goes to
    K/V head h // repeats, whose gradient is part[:, h // repeats] (B, n, dk)."""
    repeats = g.shape[1] // part.shape[1]
    return [{"head": h, "kv_head": h // repeats, "grad": encode_array(g[:, h]),
             **_size(g[:, h], part[:, h // repeats])} for h in range(g.shape[1])]

"""Where a gradient dies: every input whose gradient is missing or zero, and why.

A zero or missing gradient is silent: the engine adds nothing where nothing flows and says
nothing about it. `dead_gradients` walks the recorded graph a second time, in the
engine's order and with the same backward closures (as `path_shares` does; nothing is
read from or written to any ``.grad``), and follows each dead element back to the op that
killed it. An element's gradient is *dead* when its magnitude is at most
``rtol`` (1e-12) times the output gradient's scale, max |grad_output|.

How an op is blamed: at each edge, the op's backward is given the incoming gradient with
its own dead elements replaced by random values. An input element that is still dead
was killed *here*, by the op's local derivative, whatever came from above; the op and
the values say why (`REASONS`). An element that comes alive was dead only because its
gradient from above was: it inherits that element's reason, found by one more backward
per reason. An element alive on several paths that add up to zero is ``cancelled``.

What the graph does not hold, the inputs do: a plain integer or boolean array (ids,
targets, masks) and a Tensor that does not require grad never get a gradient; a Tensor
that requires grad but is not in the output's graph was cut off by ``detach()`` or
``no_grad`` (the recorded graph keeps no trace of either: the expression evaluator,
which sees both, names the node) or is not used.

Sources: PyTorch's anomaly mode and torchviz show a graph but not why a gradient is
zero; dead ReLU units as Lu et al. 2019 ("Dying ReLU and initialization").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.tensor import Tensor, _seed, _topological_order

__all__ = ["REASONS", "DeadCause", "DeadGradient", "dead_gradients", "dead_parameters"]

RTOL = 1e-12            # dead: |grad| <= RTOL * max |grad_output|

# reason code → the sentence a student reads (the page shows these words, not a colour)
REASONS: dict[str, str] = {
    "no_grad": "computed under no_grad: no graph was recorded, so nothing flows back",
    "detached": "detach() cut the path: the value is used, its gradient is not",
    "requires_grad_false": "requires_grad is false: a constant, so no gradient is kept",
    "integer_input": "an integer input (ids, targets) picks entries; it does not vary"
                     " smoothly, so it has no gradient",
    "boolean_input": "a boolean input (a mask, a condition) chooses positions; it has no"
                     " gradient",
    "constant_input": "a plain array, not a Tensor: a constant, so it has no gradient",
    "not_connected": "the output does not depend on it: no recorded path reaches it (not"
                     " used, or cut by detach() / no_grad)",
    "zero_seed": "the output's gradient (grad_output) is zero at these positions",
    "masked": "masked_fill replaced these positions with a constant: nothing flows back",
    "fully_masked_row": "every position of these rows is masked: the whole row gets no"
                        " gradient",
    "where_untaken": "where picked the other branch at these positions",
    "max_non_winner": "max hands its gradient only to the winner of each slice",
    "dead_relu": "ReLU's input is at most 0 here: the unit is off and passes nothing back",
    "softmax_symmetry": "zero by symmetry: the gradient reaching softmax is the same along"
                        " each row, and a softmax row sums to 1 whatever its logits",
    "multiplied_by_zero": "the other factor of the product is 0 here",
    "unused_rows": "embedding rows whose ids are not in the batch: never looked up",
    "not_selected": "the index does not select these positions",
    "saturated": "the op's local derivative is 0 (or underflows) here: it is flat",
    "cancelled": "its paths hand it gradients that add up to zero",
}


@dataclass(frozen=True, eq=False)
class DeadCause:
    """One reason some elements of an input got no gradient.

    Attributes:
        reason: a key of `REASONS`; ``words`` its sentence.
        op: the op where the path was cut (``"relu"``, ``"where"``), None when the input
            itself is the reason (an integer array, requires_grad false).
        node: the result Tensor of that op (None as for ``op``).
        elements: how many of the input's elements die for this reason.
        units: for ``dead_relu``, the units (last-axis features of the ReLU's input) off
            for every row; for ``fully_masked_row``, the rows; else None.
    """

    reason: str
    op: str | None
    node: Tensor | None
    elements: int
    units: int | None = None

    @property
    def words(self) -> str:
        return REASONS[self.reason]


@dataclass(frozen=True, eq=False)
class DeadGradient:
    """An input with a missing or partly dead gradient.

    Attributes:
        name: the caller's name for it (the mapping's key, or its position as a string).
        shape: its shape.
        dead: elements whose gradient is dead; ``size`` all its elements.
        missing: True when it gets no gradient at all (``.grad`` stays None).
        causes: why, largest first; their ``elements`` add up to ``dead``.
        rows: for a 2-D input, the rows whose whole gradient is dead (an embedding
            table's unused ids), else None.
    """

    name: str
    shape: tuple[int, ...]
    dead: int
    size: int
    missing: bool
    causes: tuple[DeadCause, ...]
    rows: int | None = None


def dead_gradients(out: Tensor, inputs: Mapping[str, Any] | Sequence[Any],
                   grad_output: Any = None, *, rtol: float = RTOL,
                   seed: int = 0) -> list[DeadGradient]:
    """Every input whose gradient from ``out.backward(grad_output)`` is missing or dead.

    Runs beside `Tensor.backward`, never inside it: a second walk of `out`'s recorded
    graph (the engine's order, the same backward closures); no ``.grad`` is read or
    written. An element is dead when |grad| <= ``rtol`` · max |grad_output|.

    Args:
        out: the tensor differentiated; its graph was recorded (requires grad).
        inputs: name → input, or a sequence (named "0", "1", ...): Tensors (leaves or
            not), or plain arrays / lists (an integer or boolean array is reported as
            such: ids, targets and masks have no gradient).
        grad_output: the seed, as `Tensor.backward`'s (default 1 for one element).
        rtol: the dead threshold relative to the seed's scale.
        seed: draws the random stand-ins for dead incoming gradients (see the module).

    Returns: one `DeadGradient` per input with a dead element, in the inputs' order;
        an empty list when every gradient is alive.

    Raises: as `Tensor.backward`: RuntimeError when `out` does not require grad,
        ValueError for a missing or misshapen grad_output; ValueError for rtol < 0.

    Example:
        >>> from glassllm.autograd import relu, matmul, tsum
        >>> x = Tensor([[1.0, -2.0]], requires_grad=True)
        >>> w = Tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
        >>> [(d.name, d.dead, [c.reason for c in d.causes])
        ...  for d in dead_gradients(tsum(relu(matmul(x, w))), {"x": x, "w": w})]
        [('x', 1, ['dead_relu']), ('w', 2, ['dead_relu'])]
    """
    if not (isinstance(rtol, int | float) and rtol >= 0):
        raise ValueError(f"dead_gradients: rtol must be a number >= 0, got {rtol!r}")
    named = list(inputs.items()) if isinstance(inputs, Mapping) else \
        [(str(i), v) for i, v in enumerate(inputs)]
    walk = _Walk(out, grad_output, rtol, np.random.default_rng(seed))
    report = []
    for name, value in named:
        entry = walk.explain(name, value)
        if entry is not None:
            report.append(entry)
    return report


def dead_parameters(named: Any, scale: float = 1.0, *, rtol: float = RTOL) -> list[dict]:
    """After a training step's backward: each parameter that got no gradient, or a zero
    one somewhere. Cheap (one pass over the gradients, no walk), for every step of a loop.

    Args:
        named: (name, Tensor) pairs, e.g. ``model.named_parameters()``.
        scale: the output gradient's scale (a mean loss's seed: 1).
        rtol: dead is |grad| <= rtol · scale.

    Returns: ``[{"name", "dead", "size", "rows", "dead_rows"}]`` for the parameters with a
        dead element, in the given order: ``dead`` elements of ``size``; for a 2-D one,
        ``dead_rows`` of its ``rows`` whole rows (an embedding's ids not in the batch);
        a missing gradient counts as dead everywhere. Bounded: one small entry per
        parameter.

    Example:
        >>> from glassllm.autograd import embedding, tsum
        >>> table = Tensor(np.ones((4, 2)), requires_grad=True)
        >>> tsum(embedding(table, np.array([0, 2]))).backward()
        >>> dead_parameters([("tok_emb.weight", table)])
        [{'name': 'tok_emb.weight', 'dead': 4, 'size': 8, 'rows': 4, 'dead_rows': 2}]
    """
    tol = rtol * scale
    report = []
    for name, p in named:
        g = p.grad
        dead = np.ones(p.shape, dtype=bool) if g is None else np.abs(g) <= tol
        count = int(np.count_nonzero(dead))
        if not count:
            continue
        rows = p.shape[0] if p.ndim == 2 else None
        report.append({"name": name, "dead": count, "size": int(p.size), "rows": rows,
                       "dead_rows": int(np.all(dead, axis=1).sum()) if rows else None})
    return report


class _Walk:
    """The second walk: each node's gradient and, per element, the reason it is dead
    (`labels`: -1 alive, else an index into `causes`)."""

    def __init__(self, out: Tensor, grad_output: Any, rtol: float,
                 rng: np.random.Generator) -> None:
        seed = _seed(out, grad_output)
        finite = np.abs(seed[np.isfinite(seed)])
        self.tol = rtol * (float(finite.max()) if finite.size else 0.0)
        self.rng = rng
        self.causes: list[tuple[str, str | None, Tensor | None]] = [("zero_seed", None, None)]
        self.order = _topological_order(out)
        self.grads: dict[Tensor, np.ndarray] = {}
        self.labels: dict[Tensor, np.ndarray] = {}
        pending: dict[Tensor, list[tuple[np.ndarray, np.ndarray]]] = {
            out: [(seed, np.where(self._dead(seed), 0, -1))]}
        for node in reversed(self.order):
            parts = pending.pop(node, None)
            if parts is None:
                continue
            g, labels = self._join(parts)
            self.grads[node], self.labels[node] = g, labels
            if node._backward is None:
                continue
            pgs = node._backward(g)
            for slot, (parent, pg) in enumerate(zip(node._parents, pgs, strict=True)):
                if pg is None or not parent.requires_grad:
                    continue
                pg = np.broadcast_to(pg, parent.shape)
                pending.setdefault(parent, []).append(
                    (pg, self._blame(node, slot, parent, g, labels, pg)))

    def _dead(self, g: np.ndarray) -> np.ndarray:
        return np.abs(np.nan_to_num(g, nan=np.inf)) <= self.tol

    def _cause(self, reason: str, op: str | None, node: Tensor | None) -> int:
        key = (reason, op, node)
        for i, (r, o, n) in enumerate(self.causes):
            if r == reason and o == op and n is node:
                return i
        self.causes.append(key)
        return len(self.causes) - 1

    def _join(self, parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """A node's gradient (its parts added in the engine's order) and its labels: an
        element dead in every part keeps the first part's reason; dead only in the sum,
        the paths cancelled."""
        g, labels = parts[0][0], parts[0][1].copy()
        for pg, _ in parts[1:]:
            g = g + pg
        if len(parts) > 1:
            dead_everywhere = np.logical_and.reduce([lab >= 0 for _, lab in parts])
            for _, lab in parts[1:]:
                take = (labels < 0) & (lab >= 0) & dead_everywhere
                labels[take] = lab[take]
            cancelled = self._dead(g) & ~dead_everywhere
            if cancelled.any():
                labels[cancelled] = self._cause("cancelled", None, None)
        return g, labels

    def _blame(self, node: Tensor, slot: int, parent: Tensor, g: np.ndarray,
               labels: np.ndarray, pg: np.ndarray) -> np.ndarray:
        """The labels of what `node` hands `parent`: killed here (by the op's local
        derivative), or inherited from the dead elements of `g`."""
        out = np.full(parent.shape, -1)
        dead = self._dead(pg)
        if not dead.any():
            return out
        stand_in = np.where(labels >= 0, self.rng.standard_normal(g.shape) + 2.0, g)
        local = dead & self._dead(self._vjp(node, slot, parent, stand_in))
        if local.any():
            out[local] = self._local_reason(node, slot, parent, g, local)
        rest = dead & ~local
        if rest.any():
            for k in np.unique(labels[labels >= 0]):
                probe = np.where(labels == k, self.rng.standard_normal(g.shape) + 2.0, 0.0)
                reached = rest & ~self._dead(self._vjp(node, slot, parent, probe))
                out[reached] = k
                rest &= ~reached
            if rest.any():          # reached by no single reason: the most common one
                values, counts = np.unique(labels[labels >= 0], return_counts=True)
                out[rest] = values[np.argmax(counts)] if values.size else 0
        return out

    @staticmethod
    def _vjp(node: Tensor, slot: int, parent: Tensor, g: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            pg = node._backward(g)[slot]
        return np.zeros(parent.shape) if pg is None else np.broadcast_to(pg, parent.shape)

    def _local_reason(self, node: Tensor, slot: int, parent: Tensor, g: np.ndarray,
                      local: np.ndarray) -> np.ndarray | int:
        """Why `node`'s op gives `parent` nothing at the `local` elements."""
        op = node._op
        simple = {"relu": "dead_relu", "where": "where_untaken", "max": "max_non_winner",
                  "embedding": "unused_rows", "getitem": "not_selected"}
        if op in simple:
            return self._cause(simple[op], op, node)
        if op == "masked_fill":
            rows = np.all(local, axis=-1, keepdims=True) if local.ndim else local
            full, some = self._cause("fully_masked_row", op, node), self._cause("masked", op, node)
            return np.where(np.broadcast_to(rows, local.shape), full, some)[local]
        if op in ("softmax", "log_softmax") and _constant_along_rows(g, self.tol):
            return self._cause("softmax_symmetry", op, node)
        if op == "mul":
            other = node._parents[1 - slot].data
            if np.all(np.broadcast_to(other, node.shape) == 0) or np.any(other == 0):
                return self._cause("multiplied_by_zero", op, node)
        return self._cause("saturated", op, node)

    def explain(self, name: str, value: Any) -> DeadGradient | None:
        """The report of one input, or None when its gradient is alive everywhere."""
        if not isinstance(value, Tensor):
            array = np.asarray(value)
            kind = {"b": "boolean_input", "i": "integer_input", "u": "integer_input"}.get(
                array.dtype.kind, "constant_input")
            return _whole(name, array.shape, kind)
        if not value.requires_grad:
            return _whole(name, value.shape, "requires_grad_false")
        if value not in self.labels:
            return _whole(name, value.shape, "not_connected")
        labels = self.labels[value]
        dead = labels >= 0
        if not dead.any():
            return None
        ids, counts = np.unique(labels[dead], return_counts=True)
        causes = []
        for k, count in sorted(zip(ids.tolist(), counts.tolist(), strict=True),
                               key=lambda kc: -kc[1]):
            reason, op, node = self.causes[k]
            causes.append(DeadCause(reason, op, node, int(count),
                                    self._units(reason, node, labels == k)))
        rows = int(np.all(dead, axis=1).sum()) if dead.ndim == 2 else None
        return DeadGradient(name, value.shape, int(dead.sum()), int(dead.size), False,
                            tuple(causes), rows)

    def _units(self, reason: str, node: Tensor | None, mask: np.ndarray) -> int | None:
        """ReLU units off for every row, or fully masked rows, at the op that killed them."""
        if node is None or reason not in ("dead_relu", "fully_masked_row"):
            return None
        k = next(i for i, (r, _, n) in enumerate(self.causes) if r == reason and n is node)
        at = self.labels.get(node._parents[0])
        killed = mask if at is None else at == k
        if killed.ndim == 0:
            return int(killed)
        if reason == "dead_relu":
            return int(np.all(killed.reshape(-1, killed.shape[-1]), axis=0).sum())
        return int(np.all(killed, axis=-1).sum())


def _constant_along_rows(g: np.ndarray, tol: float) -> bool:
    """Whether g is the same along its last axis in every row (softmax's symmetry)."""
    if g.ndim == 0:
        return True
    return bool(np.all(np.abs(g - g[..., :1]) <= max(tol, 1e-12 * float(np.max(np.abs(g))))))


def _whole(name: str, shape: tuple[int, ...], reason: str) -> DeadGradient:
    size = int(np.prod(shape))
    return DeadGradient(name, tuple(shape), size, size, True,
                        (DeadCause(reason, None, None, size),),
                        shape[0] if len(shape) == 2 else None)

"""Where a gradient comes from: a tensor's gradient split by the paths that reach it.

A tensor used more than once gets the sum of what each use hands it (L0.5): tied input
and output embeddings (the table read by `embedding` and, transposed, by the output
head), the residual stream (the skip hands its gradient on unchanged, the block through
its layers), a diamond x → f(x), g(x) → h. `Tensor.backward` keeps only the sum.
`path_shares` walks the recorded graph a second time, in the engine's own order and with
the same backward closures, and keeps each *consumer edge*'s part: what one op hands one
of its inputs, its vector-Jacobian product with the op's whole incoming gradient.

Because the walk is the engine's, each part is the very array the engine adds, and the
parts are added in the engine's order: their sum is the tensor's `.grad` bit for bit
(any other order of adding k arrays stays within (k - 1)·2⁻⁵³·Σ|part| of it).

`repeat_kv` shares one key/value head among `repeats` adjacent query heads inside one op:
its edge also keeps the incoming gradient by query head (`by_head`), so a student sees
which query heads a K/V head's gradient comes from (Ainslie et al. 2023).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.tensor import Tensor, _seed, _topological_order

__all__ = ["PathShare", "path_shares"]


@dataclass(frozen=True, eq=False)
class PathShare:
    """One consumer edge of a shared tensor: what one use hands it.

    Attributes:
        consumer: the result of the op that used the tensor.
        op: that op's name (``consumer``'s op), e.g. ``"embedding"``, ``"add"``.
        slot: which of the op's tensor inputs the tensor was, 0 first (``where(mask, a,
            b)``: a is 0); ``x * x`` gives x two edges, slots 0 and 1.
        grad: the part, shaped like the tensor: the op's backward for that input, given
            the op's whole incoming gradient. Read-only.
        by_head: for a ``repeat_kv`` edge, the incoming gradient (B, H, n, dk): query
            head h's part is ``by_head[:, h]``, added into K/V head h // repeats; else None.
    """

    consumer: Tensor
    op: str
    slot: int
    grad: np.ndarray
    by_head: np.ndarray | None = None

    def share(self, total: np.ndarray) -> float | None:
        """This part's share of `total` (the tensor's gradient): <grad, total> / <total,
        total>. The shares of a tensor's edges add up to 1; a part that works against the
        others has a negative share. None when the total is 0."""
        norm2 = float(np.sum(total * total))
        return float(np.sum(self.grad * total)) / norm2 if norm2 > 0 else None


def path_shares(out: Tensor, grad_output: Any = None) -> dict[Tensor, list[PathShare]]:
    """Each shared tensor's gradient, split by consumer edge: a second walk of `out`'s graph.

    A tensor is reported when it has more than one consumer edge (two ops use it, or one
    op twice) or a ``repeat_kv`` consumer. Its parts add up to the gradient
    ``out.backward(grad_output)`` gives it (bit for bit: the same arrays, added in the
    same order); nothing is written to any ``.grad``.

    Shapes: each part is shaped like its tensor; ``by_head`` like repeat_kv's output.

    Args:
        out: the tensor to differentiate; its graph was recorded (requires grad).
        grad_output: the seed, as `Tensor.backward`'s (default 1 for one element).

    Returns: {tensor: [PathShare, ...]} in the order the walk met the edges (tensors
        hash by identity).

    Raises: as `Tensor.backward`: RuntimeError when `out` does not require grad,
        ValueError for a missing or misshapen grad_output.

    Example:
        >>> from glassllm.autograd import embedding, matmul, transpose, tsum
        >>> w = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> logits = matmul(embedding(w, np.array([0])), transpose(w))   # w read twice
        >>> parts = path_shares(tsum(logits))[w]
        >>> {s.op: s.grad.tolist() for s in parts}
        {'embedding': [[4.0, 6.0], [0.0, 0.0]], 'transpose': [[1.0, 2.0], [1.0, 2.0]]}
    """
    seed = _seed(out, grad_output)
    order = _topological_order(out)
    uses: dict[Tensor, int] = {}
    for node in order:
        for parent in node._parents:
            if parent.requires_grad:
                uses[parent] = uses.get(parent, 0) + 1
    pending: dict[Tensor, np.ndarray] = {out: seed}
    shares: dict[Tensor, list[PathShare]] = {}
    for node in reversed(order):                      # the engine's walk, step for step
        g = pending.pop(node, None)
        if g is None or node._backward is None:
            continue
        for slot, (parent, pg) in enumerate(zip(node._parents, node._backward(g), strict=True)):
            if pg is None or not parent.requires_grad:
                continue
            pending[parent] = pg if parent not in pending else pending[parent] + pg
            if uses[parent] > 1 or node._op == "repeat_kv":
                shares.setdefault(parent, []).append(PathShare(
                    node, node._op, slot, _read_only(pg),
                    _read_only(g) if node._op == "repeat_kv" else None))
    return shares


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view: a part may be the very array another edge or the engine holds."""
    view = a.view()
    view.flags.writeable = False
    return view

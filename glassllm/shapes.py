"""What an op will build, from shapes alone (SPEC H5): result shapes and costs computed in
time proportional to the *inputs*, never to the result, so a request that would explode
is refused before any work — and before any work done only to find that out.

- `probe(shape)`: an array of a zero-byte dtype, any shape, no memory. NumPy computes
  reshape / transpose / broadcast shapes on it for free, with NumPy's own messages. It is
  *not* free for advanced indexing: ``probe((1, 1))[rows, cols]`` with index arrays of
  shapes (60000, 1) and (1, 60000) walks all 3.6e9 result positions, zero bytes each
  (20 s of CPU). Indexing shapes are therefore computed by `index_shape`.
- `matmul_shape(sa, sb)`: np.matmul's output shape and forward multiply-adds.
- `matmul_cost(sa, sb)`: the same plus what ``autograd.matmul``'s backward builds, and
  the multiply-adds of forward and backward together.
- `index_shape(shape, index)`: ``a[index].shape`` by NumPy's basic and advanced indexing
  rules, with NumPy's IndexError messages, in time proportional to the index arrays.
- the shape rules, one per op that checks more than NumPy does (`broadcast_rule`,
  `reduce_shape`, `matmul_rule`, `cross_entropy_rule`, `rope_rule`, `repeat_kv_rule`):
  each returns a `Rule`, the output shape and the axes each input's gradient is summed
  over (L0.5). The layers' contracts (`rms_norm_shape` … `transformer_block_shape`, at the
  end) return the output shape, and ``glassllm.layers`` gives them under its own name
  too. The op (`glassllm.autograd`), its plan (`glassllm.sandbox.registry`) and the
  expression ledger all call the same rule, as JAX's primitives do.
- `ShapeError`: a ValueError that names the one input whose shape breaks an op's contract,
  so the sandbox can say which input to fix (H4).

Pure shape logic: imports no op. Shape letters: see STYLE.md's glossary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from glassllm.errors import InputError, ShapeError

__all__ = ["Rule", "Shape", "ShapeError", "attention_shape", "broadcast_rule", "check_heads",
           "cross_entropy_rule", "embedding_weight_rule", "index_shape", "linear_shape",
           "matmul_cost", "matmul_promoted", "matmul_rule", "matmul_shape", "positive_count",
           "probe", "reduce_shape", "repeat_kv_rule", "rms_norm_shape", "rope_rule",
           "summed_axes", "swiglu_shape", "transformer_block_shape", "zero_d_axis"]

Shape = tuple[int, ...]
_ZERO_BYTES = np.dtype([])
MAX_DIMS = 64                                    # NumPy's limit on an array's dimensions


def probe(shape: Sequence[int]) -> np.ndarray:
    """An array of `shape` that occupies no memory: NumPy computes result shapes on it."""
    return np.empty(tuple(shape), dtype=_ZERO_BYTES)


@dataclass(frozen=True)
class Rule:
    """What an op's shape rule says: its output shape and, per differentiable input, the
    axes of its output-shaped gradient that the backward sums to undo broadcasting (L0.5).

    ``summed`` has one entry per tensor input, in the op's input order; an op that does
    not broadcast sums nothing (``()``). For matmul the axes index the gradient of the
    promoted operand, (…, n, k) or (…, k, m).
    """

    shape: tuple[int, ...]
    summed: dict[str, tuple[int, ...]] = field(default_factory=dict)


def summed_axes(grad_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of a gradient of shape `grad_shape` that must be summed to get `shape`.

    Broadcasting aligns shapes on the right: leading axes that `shape` lacks are
    summed away, and axes where `shape` has 1 but the gradient does not are
    summed with keepdims. Returned axes index `grad_shape`.

    >>> summed_axes((2, 3, 4), (3, 1))
    (0, 2)
    """
    extra = len(grad_shape) - len(shape)
    if extra < 0:
        raise ValueError(f"cannot unbroadcast a gradient of shape {grad_shape} to {shape}")
    lead = tuple(range(extra))
    kept = tuple(
        extra + i for i, n in enumerate(shape) if n == 1 and grad_shape[extra + i] != 1
    )
    return lead + kept


# --------------------------------------------------------------------------------------
# elementwise ops and reductions
# --------------------------------------------------------------------------------------

def broadcast_rule(shapes: dict[str, tuple[int, ...]], tensors: Sequence[str]) -> Rule:
    """An elementwise op (add … where, masked_fill): the output is the broadcast of all
    `shapes` (NumPy's ValueError if they clash, L0.4); each of `tensors` gets its
    gradient summed over the axes it was broadcast along (L0.5)."""
    out = tuple(np.broadcast_shapes(*shapes.values()))
    return Rule(out, {name: summed_axes(out, tuple(shapes[name])) for name in tensors})


def zero_d_axis(axis: Any) -> bool:
    """An int 0 or -1: what NumPy's reductions and softmax's axis accept on a 0-d array."""
    return isinstance(axis, int | np.integer) and not isinstance(axis, bool) and axis in (0, -1)


def reduce_shape(shape: tuple[int, ...], axis: Any, keepdims: bool = False) -> tuple[int, ...]:
    """The shape a reduction (tsum, mean, max) over `axis` leaves; NumPy's AxisError for
    an axis out of range or repeated (L2.1). NumPy's one quirk is kept: a 0-d array takes
    the single axis 0 or -1 (not in a tuple) and is its own reduction."""
    if not shape and zero_d_axis(axis):
        return ()
    axes = tuple(range(len(shape))) if axis is None else normalize_axis_tuple(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)


# --------------------------------------------------------------------------------------
# matmul
# --------------------------------------------------------------------------------------

def matmul_promoted(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[tuple, tuple]:
    """1-D operands as np.matmul sees them: a (k,) → (1, k), b (k,) → (k, 1)."""
    return (sa if len(sa) > 1 else (1, *sa)), (sb if len(sb) > 1 else (*sb, 1))



def matmul_rule(sa: tuple[int, ...], sb: tuple[int, ...]) -> Rule:
    """a @ b: np.matmul's output shape; each promoted operand's gradient is computed at
    the broadcast batch shape and summed over the batch axes it was broadcast along."""
    out, _ = matmul_shape(sa, sb)
    a2, b2 = matmul_promoted(sa, sb)
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    return Rule(out, {"a": summed_axes((*batch, *a2[-2:]), a2),
                      "b": summed_axes((*batch, *b2[-2:]), b2)})


def matmul_shape(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """np.matmul's rules, from shapes only: (output shape, multiply-adds of the forward).

    1-D operands are promoted to a row / column and the added axis is dropped again;
    batch axes broadcast (L1.1).
    """
    if not sa or not sb:
        raise ValueError("matmul: Input operand does not have enough dimensions (a 0-d operand"
                         " is not allowed; use mul)")
    a2, b2 = matmul_promoted(sa, sb)                                # (…, n, k), (…, k, m)
    if a2[-1] != b2[-2]:
        raise ValueError("matmul: Input operand 1 has a mismatch in its core dimension 0, with"
                         " gufunc signature (n?,k),(k,m?)->(n?,m?) (size"
                         f" {b2[-2]} is different from {a2[-1]})")
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, *([a2[-2]] if len(sa) > 1 else []), *([b2[-1]] if len(sb) > 1 else []))
    return out, math.prod(batch) * a2[-2] * a2[-1] * b2[-1]


def matmul_cost(sa: tuple[int, ...], sb: tuple[int, ...]
                ) -> tuple[tuple[int, ...], tuple[int, int, int], int]:
    """a @ b with its backward: (output shape, (elements of the output, of a's gradient as
    computed, of b's gradient as computed), multiply-adds of forward + backward).

    The backward is two products of the forward's size, g @ bᵀ and aᵀ @ g, so the
    multiply-adds are 3× the forward's. A batched operand's gradient is computed at the
    broadcast batch shape and then summed back to its own shape (unbroadcast, L0.5), so
    one with fewer batch elements than the output — a (1, n, k) under a (B, k, m) — costs
    an intermediate of batch × its own size. A 2-D operand does not: autograd.matmul folds
    the batch into the product (a linear layer's weight: x.reshape(-1, k).T @ g.reshape(-1, m)).
    """
    out, madds = matmul_shape(sa, sb)
    a2, b2 = matmul_promoted(sa, sb)
    batch = math.prod(np.broadcast_shapes(a2[:-2], b2[:-2]))
    grad_a = math.prod(a2) if len(a2) == 2 else batch * a2[-2] * a2[-1]
    grad_b = math.prod(b2) if len(b2) == 2 else batch * b2[-2] * b2[-1]
    return out, (math.prod(out), grad_a, grad_b), 3 * madds


# --------------------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------------------

def _is_int(item: Any) -> bool:
    return isinstance(item, int | np.integer) and not isinstance(item, bool | np.bool_)


def _out_of_bounds(i: int, axis: int, n: int) -> IndexError:
    return IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")


def index_shape(shape: Sequence[int], index: Any) -> tuple[int, ...]:
    """``a[index].shape`` for ``a`` of `shape`, by NumPy's rules, without indexing anything.

    Basic items: an int drops its axis, a slice keeps ``len(range(...))`` of it, None adds
    an axis of 1, ``...`` stands for the axes no other item names. Advanced items: integer
    arrays broadcast together (a boolean mask stands for its ``nonzero()`` arrays: one
    axis of its count of True, and 0-d True / False for a new axis of 1 / 0); once there
    is one, ints join them as 0-d arrays. The broadcast shape replaces the advanced items
    where they stand when they are adjacent, else goes first.

    Costs one pass over the index arrays (bounds, mask counts), never over the result.

    Raises: IndexError with NumPy's message (too many indices, out of bounds, mask shape,
    arrays that do not broadcast).

    Example:
        >>> index_shape((2, 3, 4), (0, slice(None), np.array([0, 1])))
        (2, 3)
        >>> index_shape((1, 1), (np.zeros((60000, 1), int), np.zeros((1, 60000), int)))
        (60000, 60000)

    Clauses: L2.2 (getitem), L3.1 (embedding), H5.
    """
    shape = tuple(shape)
    items = list(index) if isinstance(index, tuple) else [index]
    for i, item in enumerate(items):
        if not (item is None or item is Ellipsis or isinstance(item, slice) or _is_int(item)):
            items[i] = item = np.asarray(item)
            if item.dtype.kind not in "iub":
                raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis"
                                 " (`None`) and integer or boolean arrays are valid indices")

    def consumes(item: Any) -> int:                  # how many axes of `a` an item indexes
        if item is None or item is Ellipsis:
            return 0
        return item.ndim if isinstance(item, np.ndarray) and item.dtype == bool else 1

    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(consumes(item) for item in items)
    if used > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but"
                         f" {used} were indexed")
    rest = [slice(None)] * (len(shape) - used)      # what "..." (or nothing, at the end) means
    at = next((k for k, item in enumerate(items) if item is Ellipsis), len(items))
    items[at:at + 1] = rest or items[at:at + 1]     # an empty "..." still separates (below)

    advanced = any(isinstance(i, np.ndarray) and (i.ndim > 0 or i.dtype == bool) for i in items)
    # NumPy checks in this order: masks against their axes, ints against theirs, the index
    # arrays' broadcast, then — only if the broadcast is not empty — every array element.
    basic: list[tuple[int, int]] = []               # (item position, size) of kept axes
    adv: list[tuple[int, tuple[int, ...]]] = []     # (item position, shape) of advanced items
    arrays: list[tuple[np.ndarray, int]] = []       # (integer index array, its axis)
    ints: list[tuple[int, int]] = []                # (integer, its axis)
    axis = 0
    for pos, item in enumerate(items):
        if item is Ellipsis:
            continue
        if item is None:
            basic.append((pos, 1))
        elif isinstance(item, slice):
            basic.append((pos, len(range(*item.indices(shape[axis])))))
            axis += 1
        elif isinstance(item, np.ndarray) and item.dtype == bool:
            for k, m in enumerate(item.shape):      # an empty mask axis matches any size
                if m not in (0, shape[axis + k]):
                    raise IndexError(f"boolean index did not match indexed array along axis"
                                     f" {axis + k}; size of axis is {shape[axis + k]} but size"
                                     f" of corresponding boolean axis is {m}")
            adv += [(pos, (int(np.count_nonzero(item)),))] * max(item.ndim, 1)  # nonzero()
            axis += item.ndim
        else:                                       # an int (or 0-d array), or an int array
            if np.ndim(item) == 0:
                ints.append((int(item), axis))
            else:
                arrays.append((item, axis))
            if advanced:
                adv.append((pos, np.shape(item)))
            axis += 1
    for i, ax in ints:
        if not -shape[ax] <= i < shape[ax]:
            raise _out_of_bounds(i, ax, shape[ax])
    if not advanced:
        out = tuple(n for _, n in basic)
    else:
        try:
            broadcast = tuple(np.broadcast_shapes(*(s for _, s in adv)))
        except ValueError:
            shapes = " ".join(str(s).replace(" ", "") for _, s in adv if s)
            raise IndexError("shape mismatch: indexing arrays could not be broadcast together"
                             f" with shapes {shapes} ") from None
        if math.prod(broadcast):
            for values, ax in arrays:
                n = shape[ax]
                if values.size and (values.max() >= n or values.min() < -n):
                    first = np.argmax((values >= n) | (values < -n))       # NumPy names it
                    raise _out_of_bounds(int(values.flat[first]), ax, n)
        at = sorted({pos for pos, _ in adv})
        if at == list(range(at[0], at[-1] + 1)):    # adjacent: the broadcast stands there
            out = (*(n for p, n in basic if p < at[0]), *broadcast,
                   *(n for p, n in basic if p > at[-1]))
        else:                                       # separated: it goes first
            out = (*broadcast, *(n for _, n in basic))
    if len(out) > MAX_DIMS:
        raise IndexError(f"number of dimensions must be within [0, {MAX_DIMS}], indexing"
                         f" result would have {len(out)}")
    return out


# --------------------------------------------------------------------------------------
# cross-entropy, RoPE, K/V repetition (L5, L6)
# --------------------------------------------------------------------------------------

def embedding_weight_rule(weight: tuple[int, ...]) -> None:
    """embedding (L3.1): the table is (V, d), one row per id, as PyTorch's
    ``F.embedding`` requires ("'weight' must be 2-D"). ShapeError names the weight."""
    if len(weight) != 2:
        raise ShapeError("weight", f"embedding: weight must have shape (V, d), one row per"
                                   f" id, got {tuple(weight)}")


def cross_entropy_rule(logits: tuple[int, ...], targets: Any) -> Rule:
    """cross_entropy (L5.1, L5.3): logits (N, V), integer `targets` (N,) each inside
    [-V, V) → a 0-d loss. ShapeError names the input; an out-of-range target is NumPy's
    IndexError, as the gather would raise. cross_entropy_grad's output is shaped like
    logits."""
    logits, shape = tuple(logits), np.shape(targets)
    if len(logits) != 2:
        raise ShapeError("logits", f"cross_entropy: logits must have shape (N, V), got {logits}")
    if shape != (logits[0],):
        raise ShapeError("targets", f"cross_entropy: targets must have shape (N,) ="
                                    f" ({logits[0]},) to match logits {logits}, got {shape}")
    # the gather logits[arange(N), targets]: only the targets can be out of bounds (axis 1);
    # checked directly, as index_shape would, without its general pass (per op)
    values, n = np.asarray(targets), logits[1]
    if values.dtype.kind not in "iu":  # floats, bools: index_shape's refusals, word for word
        index_shape(logits, (np.arange(logits[0]), values))
    elif values.size and (values.max() >= n or values.min() < -n):
        first = np.argmax((values >= n) | (values < -n))       # NumPy names the first one
        raise _out_of_bounds(int(values.flat[first]), 1, n)
    return Rule((), {"logits": ()})


def _fits(table: tuple[int, ...], pairs: tuple[int, ...]) -> bool:
    """True when `table` broadcasts to `pairs` without widening it (right-aligned, each
    axis 1 or equal): what `np.broadcast_shapes(pairs, table) == pairs` says."""
    lead = len(pairs) - len(table)
    return lead >= 0 and all(n == 1 or n == p for n, p in zip(table, pairs[lead:], strict=True))


def rope_rule(x: tuple[int, ...], cos: tuple[int, ...], sin: tuple[int, ...]) -> Rule:
    """rope (L6.1): the output is shaped like x; the tables broadcast *to* x's (even, odd)
    pairs, never beyond them. ShapeError for an odd last axis or tables that would widen
    the pairs; NumPy's ValueError when they do not broadcast at all."""
    x, cos, sin = tuple(x), tuple(cos), tuple(sin)
    if not x or x[-1] % 2:
        raise ShapeError("x", f"rope: the last axis of x holds (even, odd) coordinate pairs and"
                              f" must have even length; x has shape {x}")
    pairs = (*x[:-1], x[-1] // 2)
    if _fits(cos, pairs) and _fits(sin, pairs):  # the common case, without NumPy's call
        return Rule(x, {"x": ()})
    if np.broadcast_shapes(pairs, cos, sin) != pairs:                 # NumPy's error if they clash
        clash = [n for n, t in (("cos", cos), ("sin", sin))
                 if np.broadcast_shapes(pairs, t) != pairs]
        raise ShapeError(", ".join(clash), f"rope: cos {cos} and sin {sin} must broadcast to the"
                                           f" pairs of x, {pairs} for x {x}: the output is"
                                           " shaped like x (L6.1)")
    return Rule(x, {"x": ()})


def positive_count(name: str, value: Any, op: str) -> int:
    """A count that must be a positive int (repeat_kv's repeats, a head count): TypeError
    for a non-int, `InputError` naming the input below 1."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"{op}: {name} must be a positive int, got {value!r}")
    if value < 1:
        raise InputError(name, f"{op}: {name} must be a positive int, got {value}")
    return int(value)


def repeat_kv_rule(x: tuple[int, ...], repeats: Any) -> Rule:
    """repeat_kv (L6.3): x (B, Hkv, n, dk), repeats ≥ 1 → (B, Hkv·repeats, n, dk)."""
    repeats = positive_count("repeats", repeats, "repeat_kv")
    if len(x) != 4:
        raise ShapeError("x", f"repeat_kv: x must have shape (B, Hkv, n, dk), got {tuple(x)}")
    return Rule((x[0], x[1] * repeats, x[2], x[3]), {"x": ()})

# --------------------------------------------------------------------------------------
# The layers' contracts (glassllm.layers): each functional form calls its rule first
# --------------------------------------------------------------------------------------

def check_heads(d: int, n_heads: int, n_kv_heads: int) -> None:
    """Raise InputError for a head count below 1, ShapeError (a ValueError) unless H
    divides d and Hkv divides H; the message
    names both numbers, ``input`` the head count to change."""
    positive_count("n_heads", n_heads, "attention")       # a count below 1: InputError
    positive_count("n_kv_heads", n_kv_heads, "attention")
    if d % n_heads:
        raise ShapeError("n_heads", f"d_model {d} is not divisible by n_heads {n_heads}")
    if n_heads % n_kv_heads:
        raise ShapeError("n_kv_heads",
                         f"n_heads {n_heads} is not divisible by n_kv_heads {n_kv_heads}")


def _expect(name: str, shape: Shape, letters: str, expected: Shape, why: str = "") -> None:
    """Refuse `name` unless its shape is exactly `expected` (written `letters`)."""
    if tuple(shape) != tuple(expected):
        raise ShapeError(name, f"{name} must have shape {letters} = {tuple(expected)}{why};"
                               f" got {tuple(shape)}")


def _last_axis(name: str, shape: Shape, letters: str) -> int:
    """The width d of an activation (..., d); a 0-d one has none."""
    if not shape:
        raise ShapeError(name, f"{name} must have shape {letters} (at least one axis); got ()")
    return shape[-1]


def rms_norm_shape(x: Shape, weight: Shape, name: str = "weight") -> Shape:
    """``rms_norm``'s contract from shapes: x (..., d), weight (d,) → out (..., d).

    `name` is what the caller calls the gain (``attn_norm`` in a block). A gain NumPy
    would broadcast, such as (n, d) or (20000, 1, 1, d), is refused: it would change the
    output's shape. Raises `ShapeError` naming the input and both shapes.
    """
    d = _last_axis("x", x, "(..., d)")
    _expect(name, weight, "(d,)", (d,), f" for x of shape {tuple(x)}")
    return tuple(x)


def linear_shape(x: Shape, weight: Shape, name: str = "weight") -> Shape:
    """``linear``'s contract from shapes: x (..., d_in), weight (d_in, d_out) → (..., d_out).

    The weight must be 2-D: a batched one (np.matmul would broadcast it) or a 1-D one
    (np.matmul would drop an axis) is not a linear layer. Raises `ShapeError`.
    """
    d_in = _last_axis("x", x, "(..., d_in)")
    if len(weight) != 2:
        raise ShapeError(name, f"{name} must be 2-D, shape (d_in, d_out) with d_in = {d_in}"
                               f" for x of shape {tuple(x)}; got {tuple(weight)}")
    _expect(name, weight, "(d_in, d_out)", (d_in, weight[1]), f" for x of shape {tuple(x)}")
    return (*x[:-1], weight[1])


def attention_shape(
    x: Shape,
    wq: Shape,
    wk: Shape,
    wv: Shape,
    wo: Shape,
    n_heads: int,
    n_kv_heads: int,
    cos: Shape,
    sin: Shape,
) -> Shape:
    """``attention``'s contract from shapes (and the two head counts) → out (B, n, d).

    Checked in this order, before any product: x is (B, n, d); H > 0 and Hkv > 0; H
    divides d and Hkv divides H; dk = d/H is even (RoPE pairs); wq (d, H·dk); wk, wv
    (d, Hkv·dk); wo (H·dk, d); cos, sin (n, dk/2). Raises `ShapeError` naming the input.
    """
    if len(x) != 3:
        raise ShapeError("x", f"x must have shape (B, n, d); got {tuple(x)}")
    B, n, d = x
    check_heads(d, n_heads, n_kv_heads)
    dk = d // n_heads
    if dk % 2:
        raise ShapeError("n_heads", f"head dimension d/H = {d}/{n_heads} = {dk} must be even"
                                    " for RoPE pairs")
    why = f" for x of shape {tuple(x)}, H={n_heads}, Hkv={n_kv_heads}"
    _expect("wq", wq, "(d, H·dk)", (d, n_heads * dk), why)
    _expect("wk", wk, "(d, Hkv·dk)", (d, n_kv_heads * dk), why)
    _expect("wv", wv, "(d, Hkv·dk)", (d, n_kv_heads * dk), why)
    _expect("wo", wo, "(H·dk, d)", (n_heads * dk, d), why)
    table = (n, dk // 2)
    clash = [name for name, s in (("cos", cos), ("sin", sin)) if tuple(s) != table]
    if clash:
        raise ShapeError(", ".join(clash), f"cos and sin must be (n, dk/2) = {table}, "
                                           f"got {tuple(cos)} and {tuple(sin)}")
    return (B, n, d)


def swiglu_shape(x: Shape, w1: Shape, w2: Shape, w3: Shape) -> Shape:
    """``swiglu``'s contract from shapes: x (..., d), w1, w3 (d, F), w2 (F, d) → (..., d).

    Raises `ShapeError` naming the weight and both shapes.
    """
    d = _last_axis("x", x, "(..., d)")
    if len(w1) != 2:
        raise ShapeError("w1", f"w1 must be 2-D, shape (d, F) with d = {d} for x of shape"
                               f" {tuple(x)}; got {tuple(w1)}")
    F = w1[1]
    why = f" for x of shape {tuple(x)} and w1 of shape {tuple(w1)}"
    _expect("w1", w1, "(d, F)", (d, F), f" for x of shape {tuple(x)}")
    _expect("w3", w3, "(d, F)", (d, F), why)
    _expect("w2", w2, "(F, d)", (F, d), why)
    return tuple(x)


def transformer_block_shape(
    x: Shape,
    attn_norm: Shape,
    wq: Shape,
    wk: Shape,
    wv: Shape,
    wo: Shape,
    ffn_norm: Shape,
    w1: Shape,
    w2: Shape,
    w3: Shape,
    n_heads: int,
    n_kv_heads: int,
    cos: Shape,
    sin: Shape,
) -> Shape:
    """``transformer_block``'s contract from shapes → out (B, n, d), checked in the order
    the block computes: attn_norm (d,), attention's weights, ffn_norm (d,), the SwiGLU
    weights. Raises `ShapeError` naming the input (``attn_norm``, not ``weight``)."""
    if len(x) != 3:
        raise ShapeError("x", f"x must have shape (B, n, d); got {tuple(x)}")
    rms_norm_shape(x, attn_norm, "attn_norm")
    attention_shape(x, wq, wk, wv, wo, n_heads, n_kv_heads, cos, sin)
    rms_norm_shape(x, ffn_norm, "ffn_norm")
    return swiglu_shape(x, w1, w2, w3)

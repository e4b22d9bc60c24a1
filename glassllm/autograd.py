"""The differentiable ops of an LLM, each with its forward and backward on one screen.

Sections follow the contract's Part L (docs/library.md): L1 arithmetic and matmul, L2
reductions, shape and selection, L3 embedding and mask, L4 distributions and activations,
L5 cross-entropy, L6 RoPE and K/V repetition.

Every op reads top to bottom: coerce the inputs (numbers, lists and arrays become
constant Tensors, L0.3), compute `out`, define `backward(g)` underneath, return the
new Tensor with its parents and op name. What a backward needs is saved in local
variables when the op runs (`a_data = a.data  # saved for backward`), so rebinding a
tensor's `.data` later cannot change the gradients of a graph already built (and the
arrays themselves are read-only). In the `Backward:` blocks `g` is the
incoming gradient (shaped like the output) and `out` is the result; a gradient
computed for a broadcast input is summed back to that input's shape with
`unbroadcast` (L0.5).

The module is longer than 400 lines on purpose: one file, top-down in SPEC order,
so a student can read the whole autograd like a chapter.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from glassllm.shapes import (
    cross_entropy_rule,
    embedding_weight_rule,
    matmul_promoted,
    reduce_shape,
    repeat_kv_rule,
    rope_rule,
)
from glassllm.tensor import Tensor, unbroadcast

__all__ = [
    "add",
    "cross_entropy",
    "cross_entropy_grad",
    "div",
    "embedding",
    "exp",
    "gelu",
    "gelu_tanh",
    "getitem",
    "log",
    "log_softmax",
    "masked_fill",
    "matmul",
    "max",
    "mean",
    "mul",
    "neg",
    "pow",
    "relu",
    "repeat_kv",
    "reshape",
    "rope",
    "sigmoid",
    "silu",
    "softmax",
    "softmax_np",
    "sqrt",
    "sub",
    "tanh",
    "transpose",
    "tsum",
    "where",
]


def _t(x: Any) -> Tensor:
    """Coerce a number / list / array to a constant Tensor (L0.3)."""
    return x if isinstance(x, Tensor) else Tensor(x)


def _frozen(arr: np.ndarray) -> np.ndarray:
    """A read-only copy: what a backward reads cannot change after the op ran (like Tensor.data).

    Masks, ids, targets, indices and tables are plain arrays the caller still holds; an
    in-place change to them between forward and backward would silently move gradients.
    """
    arr = np.array(arr, copy=True)
    arr.flags.writeable = False
    return arr


def _bool_mask(mask: Any, op: str, name: str) -> np.ndarray:
    """A boolean NumPy mask (L2.3, L3.4); anything else is a TypeError naming it."""
    if isinstance(mask, Tensor):
        raise TypeError(f"{op}: {name} must be a boolean NumPy mask, not a Tensor (L0.6)")
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"{op}: {name} must be a boolean mask (dtype bool), got dtype {mask.dtype}")
    return _frozen(mask)


def _int_array(ids: Any, op: str, name: str) -> np.ndarray:
    """An integer NumPy array (L3.3, L5.1); floats and bools are a TypeError naming it."""
    if isinstance(ids, Tensor):
        raise TypeError(f"{op}: {name} must be an integer NumPy array, not a Tensor (L0.6)")
    ids = np.asarray(ids)
    if ids.dtype == np.bool_ or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{op}: {name} must be integers, got dtype {ids.dtype}")
    return _frozen(_as_index(ids, op, name))


def _as_index(ids: np.ndarray, op: str, name: str) -> np.ndarray:
    """Integer ids in the platform index type `np.intp`, whatever integer dtype they came in.

    NumPy 2 keeps small dtypes in arithmetic with Python ints: `uint8_ids % 256` raises
    OverflowError, `int8_ids + 200` wraps. Indexing code does such arithmetic (negative
    ids counted from the end), so ids are widened once, on entry (L3.3). A uint64 id
    past the index type cannot index anything: IndexError naming it.
    """
    if ids.dtype == np.intp:
        return ids
    if not np.can_cast(ids.dtype, np.intp) and ids.size and ids.max() > np.iinfo(np.intp).max:
        raise IndexError(f"{op}: {name} holds {ids.max()}, past the largest index")
    return ids.astype(np.intp)


def _constant(x: Any, op: str, name: str) -> np.ndarray:
    """A non-differentiable float64 constant (exponent, fill value, trig table; L0.6)."""
    if isinstance(x, Tensor):
        if x.requires_grad:
            raise TypeError(
                f"{op}: {name} is a constant and gets no gradient (L0.6); pass its .data "
                "or a plain number/array"
            )
        return x.data  # read-only already
    if type(x) is float or type(x) is int:  # a new array nobody else can reach
        return np.array(x, dtype=np.float64)
    return _frozen(np.asarray(x, dtype=np.float64))


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """`axis` (None, int or tuple) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        return (operator.index(axis) % ndim if ndim else 0,)
    return tuple(sorted(operator.index(a) % ndim if ndim else 0 for a in axis))


def _keepdims_grad(g: np.ndarray, axis: Any, keepdims: bool, ndim: int) -> np.ndarray:
    """Put back the reduced axes of `g` as size-1 axes, ready to broadcast."""
    if keepdims or ndim == 0:
        return g
    if axis is None:
        return g.reshape((1,) * ndim)
    shape = list(g.shape)
    for ax in _axes(axis, ndim):  # ascending, so each lands where it was
        shape.insert(ax, 1)
    return g.reshape(shape)


def _spread(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`g` broadcast to `shape`, written into a new array of its own.

    The gradient of a sum or mean (and a leaf can keep it as it is: the engine hands
    over an array nobody else holds, where a broadcast view would be copied).
    """
    out = np.empty(shape)
    out[...] = g
    return out


# ============================================================================
# L1  Arithmetic and matrix product
# ============================================================================
def add(a: Any, b: Any) -> Tensor:
    """Elementwise sum with NumPy broadcasting: out = a + b.

    Shapes: a, b broadcast to out.

    Backward:
        a: unbroadcast(g)
        b: unbroadcast(g)

    Raises: ValueError when the shapes do not broadcast (NumPy's message, L0.4).

    Example:
        >>> x = Tensor([[1.0, 2.0]], requires_grad=True)
        >>> add(x, [[10.0], [20.0]]).sum().backward()
        >>> x.grad.tolist()
        [[2.0, 2.0]]

    Clauses: L1.1, L0.5.
    """
    a, b = _t(a), _t(b)
    out = a.data + b.data
    a_data, b_data = a.data, b.data  # saved for backward

    def backward(g: np.ndarray):
        ga = unbroadcast(g, a_data.shape) if a.requires_grad else None
        gb = unbroadcast(g, b_data.shape) if b.requires_grad else None
        return ga, gb

    return Tensor._make(out, (a, b), "add", backward)


def sub(a: Any, b: Any) -> Tensor:
    """Elementwise difference with broadcasting: out = a - b.

    Backward:
        a: unbroadcast(g)
        b: unbroadcast(-g)

    Example:
        >>> x = Tensor([3.0], requires_grad=True)
        >>> (2 - x).sum().backward()
        >>> x.grad.tolist()
        [-1.0]

    Clauses: L1.1, L0.5.
    """
    a, b = _t(a), _t(b)
    out = a.data - b.data
    a_data, b_data = a.data, b.data  # saved for backward

    def backward(g: np.ndarray):
        ga = unbroadcast(g, a_data.shape) if a.requires_grad else None
        gb = unbroadcast(-g, b_data.shape) if b.requires_grad else None
        return ga, gb

    return Tensor._make(out, (a, b), "sub", backward)


def mul(a: Any, b: Any) -> Tensor:
    """Elementwise product with broadcasting: out = a * b.

    Backward:
        a: unbroadcast(g * b)
        b: unbroadcast(g * a)

    Example:
        >>> x = Tensor([2.0, 3.0], requires_grad=True)
        >>> mul(x, x).sum().backward()
        >>> x.grad.tolist()
        [4.0, 6.0]

    Clauses: L1.1, L0.5.
    """
    a, b = _t(a), _t(b)
    out = a.data * b.data
    a_data, b_data = a.data, b.data  # saved for backward

    def backward(g: np.ndarray):
        ga = unbroadcast(g * b_data, a_data.shape) if a.requires_grad else None
        gb = unbroadcast(g * a_data, b_data.shape) if b.requires_grad else None
        return ga, gb

    return Tensor._make(out, (a, b), "mul", backward)


def div(a: Any, b: Any) -> Tensor:
    """Elementwise quotient with broadcasting: out = a / b.

    Division by zero follows IEEE/NumPy: ±inf or NaN with a RuntimeWarning (L1.2).

    Backward:
        a: unbroadcast(g / b)
        b: unbroadcast(-g * a / b**2)

    Example:
        >>> x = Tensor([2.0], requires_grad=True)
        >>> (1 / x).sum().backward()
        >>> x.grad.tolist()
        [-0.25]

    Clauses: L1.1, L1.2, L0.5.
    """
    a, b = _t(a), _t(b)
    out = a.data / b.data
    a_data, b_data = a.data, b.data  # saved for backward

    def backward(g: np.ndarray):
        ga = unbroadcast(g / b_data, a_data.shape) if a.requires_grad else None
        gb = unbroadcast(-g * a_data / (b_data * b_data), b_data.shape) if b.requires_grad else None
        return ga, gb

    return Tensor._make(out, (a, b), "div", backward)


def neg(a: Any) -> Tensor:
    """Negation: out = -a.

    Backward:
        a: -g

    Example:
        >>> x = Tensor([1.0, -2.0], requires_grad=True)
        >>> neg(x).sum().backward()
        >>> x.grad.tolist()
        [-1.0, -1.0]

    Clauses: L1.1.
    """
    a = _t(a)

    def backward(g: np.ndarray):
        return (-g,)

    return Tensor._make(-a.data, (a,), "neg", backward)


def pow(a: Any, exponent: Any) -> Tensor:
    """Elementwise power with a constant exponent: out = a ** exponent.

    `exponent` is a number or array (broadcasting with `a`); it is not
    differentiable (L0.6). For a differentiable exponent write
    `exp(b * log(a))`. Powers outside the real domain (e.g. (-8) ** (1/3)) give
    NaN with a warning (L1.2).

    Backward:
        a: unbroadcast(g * exponent * a ** (exponent - 1)), and 0 where exponent == 0
           (as PyTorch, so a ** 0 has zero gradient even at a = 0)
        exponent: not differentiable (L0.6)

    Raises: TypeError if `exponent` is a Tensor that requires grad.

    Example:
        >>> x = Tensor([3.0], requires_grad=True)
        >>> (x ** 2).sum().backward()
        >>> x.grad.tolist()
        [6.0]

    Clauses: L1.1, L1.2, L0.6.
    """
    a = _t(a)
    p = _constant(exponent, "pow", "exponent")
    out = _power(a.data, p)
    a_data = a.data  # saved for backward
    no_zero = float(p) != 0.0 if p.ndim == 0 else bool(np.all(p != 0))

    def backward(g: np.ndarray):
        if no_zero:
            local = p * _power(a_data, p - 1)
        else:  # the zero-exponent positions are replaced, so hide their 0 ** -1
            with np.errstate(divide="ignore", invalid="ignore"):
                local = np.where(p == 0, 0.0, p * _power(a_data, p - 1))
        return (unbroadcast(g * local, a_data.shape),)

    return Tensor._make(out, (a,), "pow", backward)


def _power(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """x ** p, with the exact short forms PyTorch uses for common scalar exponents.

    x*x*x is what PyTorch computes for x ** 3, so glassllm's numbers match it (and it
    is far cheaper than the general `pow`); 2, 0.5 and -1 are NumPy's own short forms.
    """
    if p.ndim == 0:
        e = float(p)
        if e == 2.0:
            return x * x
        if e == 3.0:
            return x * x * x
        if e == 0.5:
            return np.sqrt(x)
        if e == -0.5:
            return 1.0 / np.sqrt(x)
        if e == -1.0:
            return 1.0 / x
        if e == -2.0:
            return 1.0 / (x * x)
    return x**p


def _rpow(base: Any, exponent: Any) -> Tensor:
    """`base ** t` for a constant base and a Tensor exponent (behind `Tensor.__rpow__`).

    Backward:
        exponent: unbroadcast(g * out * log(base)); 0 where base == 0 and exponent >= 0,
                  as PyTorch (so 0 ** t for t < 0 gives inf * -inf = -inf)
        base: not differentiable (a constant, L0.6)
    """
    b = _constant(base, "pow", "base")
    e = _t(exponent)
    out = b**e.data
    e_data = e.data  # saved for backward

    def backward(g: np.ndarray):
        zero = (b == 0) & (e_data >= 0)  # d/dt 0 ** t = 0 for t > 0 (and PyTorch's 0 at t = 0)
        log_b = np.log(np.where(zero, 1.0, b))  # log(0) only where it is the answer (t < 0)
        local = np.where(zero, 0.0, out * log_b)
        return (unbroadcast(g * local, e_data.shape),)

    return Tensor._make(out, (e,), "rpow", backward)


def exp(a: Any) -> Tensor:
    """Elementwise e ** a, unclipped: large inputs overflow to inf with a warning (L1.2).

    Backward:
        a: g * out

    Example:
        >>> x = Tensor([0.0], requires_grad=True)
        >>> exp(x).sum().backward()
        >>> x.grad.tolist()
        [1.0]

    Clauses: L1.1, L1.2.
    """
    a = _t(a)
    out = np.exp(a.data)

    def backward(g: np.ndarray):
        return (g * out,)

    return Tensor._make(out, (a,), "exp", backward)


def log(a: Any) -> Tensor:
    """Elementwise natural logarithm; log(0) = -inf and log(<0) = NaN, with a warning (L1.2).

    Backward:
        a: g / a

    Example:
        >>> x = Tensor([2.0], requires_grad=True)
        >>> log(x).sum().backward()
        >>> x.grad.tolist()
        [0.5]

    Clauses: L1.1, L1.2.
    """
    a = _t(a)
    out = np.log(a.data)
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        return (g / a_data,)

    return Tensor._make(out, (a,), "log", backward)


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with `np.matmul` rules: out = a @ b.

    1-D operands are promoted (a: (k,) -> (1, k); b: (k,) -> (k, 1)) and the
    added axis removed again; leading (batch) axes broadcast.

    Shapes: (..., n, k) @ (..., k, m) -> (..., n, m); (k,) @ (k,) -> ().

    Backward:
        a: unbroadcast(g @ bᵀ)
        b: unbroadcast(aᵀ @ g)

    (ᵀ swaps the last two axes; a 1-D operand is promoted first, as in the forward.)

    Raises: ValueError on mismatched inner dimensions or 0-d operands (NumPy's message).

    Example:
        >>> w = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> matmul([1.0, 1.0], w).sum().backward()
        >>> w.grad.tolist()
        [[1.0, 1.0], [1.0, 1.0]]

    Clauses: L1.1, L0.5.
    """
    a, b = _t(a), _t(b)
    a_data, b_data = a.data, b.data  # saved for backward
    if a_data.ndim > 2 and b_data.ndim == 2:  # a linear layer: one 2-D product, not a loop
        out = (a_data.reshape(-1, a_data.shape[-1]) @ b_data).reshape(
            *a_data.shape[:-1], b_data.shape[-1]
        )
    else:
        out = np.matmul(a_data, b_data)

    def backward(g: np.ndarray):
        if a_data.ndim == 2 and b_data.ndim == 2:  # the plain case: (n, k) @ (k, m)
            return (g @ b_data.T if a.requires_grad else None,
                    a_data.T @ g if b.requires_grad else None)
        sa, sb = matmul_promoted(a_data.shape, b_data.shape)  # (1, k), (k, 1) for 1-D
        a2, b2 = a_data.reshape(sa), b_data.reshape(sb)
        if b_data.ndim == 1:
            g = np.expand_dims(g, -1)
        if a_data.ndim == 1:
            g = np.expand_dims(g, -2)  # now g is shaped like a2 @ b2
        ga = gb = None
        if a.requires_grad:
            if a2.ndim == 2 and b2.ndim > 2:  # one matrix used by every batch: sum in the product
                n, m = g.shape[-2], g.shape[-1]
                g_rows = np.moveaxis(g, -2, 0).reshape(n, -1)  # (n, batch·m)
                b_rows = np.moveaxis(b2, -2, 0).reshape(b2.shape[-2], -1)  # (k, batch·m)
                ga = (g_rows @ b_rows.T).reshape(a_data.shape)  # (n, k)
            elif b2.ndim == 2 and a2.ndim > 2:  # (B·n, m) @ (m, k), as the forward
                ga = (g.reshape(-1, g.shape[-1]) @ b2.T).reshape(a_data.shape)
            else:
                ga = unbroadcast(np.matmul(g, np.swapaxes(b2, -1, -2)), a2.shape)
                ga = ga.reshape(a_data.shape)
        if b.requires_grad:
            if b2.ndim == 2 and a2.ndim > 2:  # e.g. a linear layer's weight: (k, B·n) @ (B·n, m)
                k, m = b2.shape
                gb = (a2.reshape(-1, k).T @ g.reshape(-1, m)).reshape(b_data.shape)
            else:
                gb = unbroadcast(np.matmul(np.swapaxes(a2, -1, -2), g), b2.shape)
                gb = gb.reshape(b_data.shape)
        return ga, gb

    return Tensor._make(out, (a, b), "matmul", backward)


# ============================================================================
# L2  Reductions, shape and selection
# ============================================================================
def tsum(a: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Sum over `axis` (None: all axes; int or tuple; negative counts from the end).

    Named `tsum` so as not to shadow the builtin `sum` (L2.1).

    Shapes: (..., ) -> the reduced shape; size-1 axes kept when `keepdims`.

    Backward:
        a: g with the reduced axes put back, broadcast to a's shape
        axis, keepdims: not differentiable (L2.4)

    Raises: numpy.exceptions.AxisError for an axis out of range (L0.4).

    Example:
        >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> tsum(x, axis=-1).backward(np.array([1.0, 10.0]))
        >>> x.grad.tolist()
        [[1.0, 1.0], [10.0, 10.0]]

    Clauses: L2.1, L2.4.
    """
    a = _t(a)
    out = a.data.sum(axis=axis, keepdims=keepdims)
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        return (_spread(_keepdims_grad(g, axis, keepdims, a_data.ndim), a_data.shape),)

    return Tensor._make(out, (a,), "tsum", backward)


def mean(a: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over `axis`: out = tsum(a, axis) / count.

    Computed as NumPy's `np.mean` computes it (a sum, then one division), but without
    its "Mean of empty slice" `warnings`-module warning: an empty reduction is 0 / 0,
    NaN with NumPy's floating-point "invalid value" warning, which callers can catch
    per thread with `np.errstate` (the sandbox does, H6).

    Backward:
        a: g / count, broadcast back to a's shape (count = elements averaged)

    Example:
        >>> x = Tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        >>> mean(x).backward()
        >>> x.grad.tolist()
        [0.25, 0.25, 0.25, 0.25]

    Clauses: L2.1, L2.4.
    """
    a = _t(a)
    total = a.data.sum(axis=axis, keepdims=keepdims)  # NumPy checks the axes here
    if total.size:  # elements per slice = all elements / slices
        count = a.data.size // total.size
    else:
        count = math.prod(a.data.shape[i] for i in _axes(axis, a.data.ndim))
    out = np.true_divide(total, count)
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        if count == 0:  # nothing was averaged: a is empty, and so is its gradient
            return (np.zeros_like(a_data),)
        return (_spread(_keepdims_grad(g, axis, keepdims, a_data.ndim) / count, a_data.shape),)

    return Tensor._make(out, (a,), "mean", backward)


def max(a: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Maximum over `axis`; also `Tensor.max`.

    Ties split the incoming gradient equally among the tied positions, as
    PyTorch's `amax` and JAX's `max` do (L2.5). A NaN in a slice makes its max NaN
    and its whole gradient NaN, as in both of them; the input's NaN is the signal, and
    the op adds no divide-by-zero warning of its own.

    Backward:
        a: g / k at each of the k positions equal to the max of its slice, 0 elsewhere
           (computed as hit * (g / k); a NaN slice matches nothing, k = 0, which is taken
           as NaN so the whole slice's gradient is NaN, as PyTorch's)

    Raises: ValueError naming the axis when a reduced axis has length 0 (no maximum
    exists; PyTorch raises too, where tsum gives 0 and mean NaN); AxisError for a bad
    axis (NumPy's).

    Example:
        >>> x = Tensor([1.0, 3.0, 3.0], requires_grad=True)
        >>> max(x).backward()
        >>> x.grad.tolist()
        [0.0, 0.5, 0.5]

    Clauses: L2.1, L2.5.
    """
    a = _t(a)
    a_data = a.data  # saved for backward
    if a_data.size == 0:  # only an empty array can have an axis of length 0
        np.sum(a_data, axis=axis)  # NumPy checks the axes first (AxisError)
        empty = [i for i in _axes(axis, a_data.ndim) if a_data.shape[i] == 0]
        if empty:
            raise ValueError(
                f"max: axis {empty[0]} of a (shape {a_data.shape}) has length 0, and a "
                "maximum over no elements has no value (PyTorch refuses it too); sum gives "
                "0 and mean NaN there"
            )
    # NumPy checks the axes (AxisError); saved for backward: the slice maxima
    top = np.max(a_data, axis=axis, keepdims=True)
    out = top if keepdims else top.reshape(reduce_shape(a_data.shape, axis))

    def backward(g: np.ndarray):
        hit = a_data == top  # a NaN max matches nothing: count 0, the slice's gradient NaN
        g = _keepdims_grad(g, axis, keepdims, a_data.ndim)
        if np.count_nonzero(hit) == top.size and not np.isnan(top).any():
            return (hit * g,)  # every slice has one maximum (count 1): no ties to split
        count = hit.sum(axis=axis, keepdims=True, dtype=np.float64)
        count[count == 0] = np.nan  # a NaN slice: NaN quietly, not g / 0 (a spurious warning)
        return (hit * (g / count),)

    return Tensor._make(out, (a,), "max", backward)


def reshape(a: Any, shape: Any) -> Tensor:
    """Same data, new shape (NumPy rules, one -1 allowed).

    Backward:
        a: g.reshape(a.shape)

    Raises: ValueError when the element counts differ (NumPy's message).

    Example:
        >>> x = Tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        >>> y = reshape(x, (2, -1))
        >>> y.shape
        (2, 2)
        >>> y.backward(np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> x.grad.tolist()
        [1.0, 2.0, 3.0, 4.0]

    Clauses: L2.2.
    """
    a = _t(a)
    out = np.reshape(a.data, shape)
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        return (g.reshape(a_data.shape),)

    return Tensor._make(out, (a,), "reshape", backward)


def transpose(a: Any, axes: Any = None) -> Tensor:
    """Permute axes (`axes=None` reverses them, like `ndarray.T`).

    Backward:
        a: g transposed by the inverse permutation (argsort of axes)

    Raises: ValueError / AxisError for an invalid permutation (NumPy's).

    Example:
        >>> transpose(Tensor([[1.0, 2.0]])).shape
        (2, 1)

    Clauses: L2.2.
    """
    a = _t(a)
    out = np.transpose(a.data, axes)
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        if axes is None:
            return (np.transpose(g),)
        return (np.transpose(g, np.argsort([operator.index(x) % a_data.ndim for x in axes])),)

    return Tensor._make(out, (a,), "transpose", backward)


def getitem(a: Any, index: Any) -> Tensor:
    """NumPy indexing `a[index]`: ints, slices, None, Ellipsis, int and bool arrays.

    Backward:
        a: zeros shaped like a, with g scatter-added at the selected positions
           (`np.add.at`), so a position selected k times gets k contributions
        index: not differentiable (L0.6)

    Raises: IndexError for an out-of-range or invalid index (NumPy's message).

    Example:
        >>> x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
        >>> getitem(x, np.array([0, 0, 2])).sum().backward()
        >>> x.grad.tolist()
        [2.0, 0.0, 1.0]

    Clauses: L2.2, L0.6.
    """
    a = _t(a)
    if isinstance(index, list):  # NumPy reads a list index as an int array
        index = np.asarray(index)
    items = index if isinstance(index, tuple) else (index,)
    items = tuple(_index_item(i) for i in items)
    index = items if isinstance(index, tuple) else items[0]  # arrays copied, read-only
    out = a.data[index]
    advanced = any(isinstance(i, np.ndarray) for i in items)
    a_data = a.data  # saved for backward

    rows = isinstance(index, np.ndarray) and index.dtype.kind in "iu" and a_data.ndim > 0

    def backward(g: np.ndarray):
        if rows:  # a[ids]: whole rows, as embedding's backward (sorted scatter-add)
            return (_scatter_add_rows(a_data.shape, index, g),)
        ga = np.zeros_like(a_data)
        if advanced:
            np.add.at(ga, index, g)  # repeated positions accumulate
        else:
            ga[index] = g  # basic indexing never selects a position twice
        return (ga,)

    return Tensor._make(out, (a,), "getitem", backward)


def _index_item(item: Any) -> Any:
    """One item of a getitem index: arrays copied read-only, integer arrays as np.intp."""
    if not isinstance(item, (np.ndarray, list)):
        return item
    arr = np.asarray(item)
    if arr.dtype.kind in "iu":
        arr = _as_index(arr, "getitem", "index")
    return _frozen(arr)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Pick from `a` where `condition` is True, else from `b`; all three broadcast.

    Shapes: condition, a, b broadcast to out.

    Backward:
        a: unbroadcast(where(condition, g, 0))
        b: unbroadcast(where(condition, 0, g))
        condition: not differentiable (L0.6)

    Raises: TypeError if condition is not a boolean mask (L2.3); ValueError if
    the shapes do not broadcast.

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> where(np.array([True, False]), x, 0.0).sum().backward()
        >>> x.grad.tolist()
        [1.0, 0.0]

    Clauses: L2.2, L2.3.
    """
    condition = _bool_mask(condition, "where", "condition")
    a, b = _t(a), _t(b)
    out = np.where(condition, a.data, b.data)
    a_data, b_data = a.data, b.data  # saved for backward

    def backward(g: np.ndarray):
        ga = unbroadcast(np.where(condition, g, 0.0), a_data.shape) if a.requires_grad else None
        gb = unbroadcast(np.where(condition, 0.0, g), b_data.shape) if b.requires_grad else None
        return ga, gb

    return Tensor._make(out, (a, b), "where", backward)


# ============================================================================
# L3  Embedding and mask
# ============================================================================
def embedding(weight: Any, ids: Any) -> Tensor:
    """Look up rows of `weight` by integer ids, without building a one-hot.

    out[..., :] = weight[ids[...], :]

    Shapes: weight (V, d), ids any integer shape S (e.g. (B, n)) -> S + (d,).

    Backward:
        weight: zeros (V, d) with each row of g scatter-added into row ids[...],
                so a row used k times receives k contributions (L3.2)
        ids: not differentiable (L0.6)

    Raises: ShapeError (a ValueError) unless weight is 2-D; TypeError if ids are not
    integers; IndexError for an id outside [-V, V) (NumPy's rules, negative ids count
    from the end, L3.3).

    Example:
        >>> weight = Tensor(np.zeros((4, 2)), requires_grad=True)
        >>> embedding(weight, np.array([1, 2, 1])).sum().backward()
        >>> weight.grad.tolist()
        [[0.0, 0.0], [2.0, 2.0], [1.0, 1.0], [0.0, 0.0]]

    Clauses: L3.1-L3.3.
    """
    weight = _t(weight)
    embedding_weight_rule(weight.data.shape)
    ids = _int_array(ids, "embedding", "ids")
    out = weight.data[ids]  # S + (d,)
    weight_data = weight.data  # saved for backward

    def backward(g: np.ndarray):
        return (_scatter_add_rows(weight_data.shape, ids, g),)

    return Tensor._make(out, (weight,), "embedding", backward)


_AT_ELEMENTS = 4096  # up to here one np.add.at call; past it the sorted sum (see below)
_FEW_REPEATS = 8  # up to this many rows per id, adding by rank; past it reduceat


def _scatter_add_rows(shape: tuple[int, ...], ids: np.ndarray, g: np.ndarray) -> np.ndarray:
    """zeros(shape) with row g[i] added into row ids[i], repeated ids accumulating.

    The sums of `np.add.at(out, ids, g)`. A few elements (up to `_AT_ELEMENTS`) go
    straight to `np.add.at`, whose one call beats the sort's six there. For more, it is
    computed faster from the ids sorted (stably). When no id repeats more than
    `_FEW_REPEATS` times, the first row of every id is added at once (one fancy-index
    `+=`: distinct ids), then the second, and so on: add.at's sums, in its order. Else
    each run of equal ids is summed at once with `np.add.reduceat` and the sums added into
    the zeros; `reduceat` may add a run's rows in another order than `add.at`'s one by
    one, so the last bit of a row with several contributions can differ there.
    """
    out = np.zeros(shape)  # (V, d)
    flat = ids.reshape(-1) % shape[0]  # (M,), negative ids counted from the end (L3.3)
    if flat.size == 0:
        return out
    rows = g.reshape(flat.size, -1)  # (M, d)
    table = out.reshape(shape[0], -1)  # (V, d)
    if rows.size <= _AT_ELEMENTS:
        np.add.at(table, flat, rows)
        return out
    order = np.argsort(flat, kind="stable")
    sorted_ids = flat[order]
    new_run = np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1]))  # (M,)
    starts = np.flatnonzero(new_run)
    # each row's rank among the rows of its id, in the order given (0: the id's first)
    rank = np.arange(flat.size) - starts[np.cumsum(new_run) - 1]
    most = int(rank.max()) + 1  # rows of the most repeated id
    if most <= _FEW_REPEATS:
        for k in range(most):
            pick = order[rank == k]  # the k-th row of every id that has one
            table[flat[pick]] += rows[pick]
        return out
    # += into the zeros (each id once): 0.0 + sum, so an all -0.0 run gives +0.0 as add.at
    table[sorted_ids[starts]] += np.add.reduceat(rows[order], starts, axis=0)
    return out


def masked_fill(a: Any, mask: Any, value: Any) -> Tensor:
    """Replace the positions where `mask` is True by the constant `value`.

    Equals `where(mask, value, a)`: mask=True means replace / block, not allow.
    With `value=-np.inf` before `softmax`, masked positions get weight exactly 0
    as long as every row keeps one unmasked entry (L3.5).

    Shapes: a and mask broadcast to out.

    Backward:
        a: unbroadcast(where(mask, 0, g)), masked positions get no gradient
        mask, value: not differentiable (L0.6)

    Raises: TypeError if mask is not boolean or value requires grad.

    Example:
        >>> s = Tensor([[0.0, 0.0]], requires_grad=True)
        >>> masked_fill(s, np.array([[False, True]]), -np.inf).data.tolist()
        [[0.0, -inf]]

    Clauses: L3.4, L3.5.
    """
    a = _t(a)
    mask = _bool_mask(mask, "masked_fill", "mask")
    fill = _constant(value, "masked_fill", "value")
    out = np.where(mask, fill, a.data)
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        return (unbroadcast(np.where(mask, 0.0, g), a_data.shape),)

    return Tensor._make(out, (a,), "masked_fill", backward)


# ============================================================================
# L4  Distributions and activations
# ============================================================================
def _softmax_data(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:  # one entry: NumPy checks the axis (0 or -1), then as a 1-element row
        x.max(axis=axis)
        return _softmax_data(x.reshape(1), 0).reshape(())
    if x.size == 0:  # a zero-length axis (or batch): an empty result, as PyTorch
        np.sum(x, axis=axis)  # NumPy still checks the axis (AxisError)
        return np.array(x, dtype=np.float64)
    e = x - x.max(axis=axis, keepdims=True)  # largest entry becomes 0
    np.exp(e, out=e)  # in place: one array instead of three
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax_data(x: np.ndarray, axis: int) -> np.ndarray:
    if x.size == 0:  # as _softmax_data: empty in, empty out
        np.sum(x, axis=axis)
        return np.array(x, dtype=np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)  # largest entry becomes 0
    shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True))  # in place
    return shifted


def softmax(a: Any, axis: int = -1) -> Tensor:
    """Softmax along `axis`: out = exp(a - max) / sum(exp(a - max)).

    Subtracting the maximum keeps large finite logits from overflowing; a row
    that is all -inf, or holds NaN / +inf, gives NaN (L4.1). Over a zero-length axis
    the result is empty (same shape), as in PyTorch.

    Backward:
        a: out * (g - sum(g * out, axis, keepdims=True))

    Example:
        >>> softmax(Tensor([[1000.0, 1000.0]])).data.tolist()
        [[0.5, 0.5]]

    Clauses: L4.1, L3.5.
    """
    a = _t(a)
    out = _softmax_data(a.data, axis)

    def backward(g: np.ndarray):
        return (out * (g - (g * out).sum(axis=axis, keepdims=True)),)

    return Tensor._make(out, (a,), "softmax", backward)


def log_softmax(a: Any, axis: int = -1) -> Tensor:
    """Log-softmax along `axis`: out = (a - max) - log(sum(exp(a - max))).

    Backward:
        a: g - exp(out) * sum(g, axis, keepdims=True)

    Example:
        >>> log_softmax(Tensor([[1000.0, 1000.0]])).data.tolist() == [[-np.log(2)] * 2]
        True

    Clauses: L4.1.
    """
    a = _t(a)
    out = _log_softmax_data(a.data, axis)

    def backward(g: np.ndarray):
        return (g - np.exp(out) * g.sum(axis=axis, keepdims=True),)

    return Tensor._make(out, (a,), "log_softmax", backward)


def softmax_np(x: Any, axis: int = -1) -> np.ndarray:
    """Plain-NumPy softmax of an array-like (no graph); returns `np.ndarray` (L4.3).

    Example:
        >>> softmax_np([[1000.0, 1000.0]]).tolist()
        [[0.5, 0.5]]

    Clauses: L4.1, L4.3, L0.2.
    """
    if isinstance(x, Tensor):
        x = x.data
    return _softmax_data(np.asarray(x, dtype=np.float64), axis)


def _sigmoid_data(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # sigmoid(x) = exp(min(x, 0)) / (1 + exp(-|x|)): for x >= 0 the numerator is 1, for
    # x < 0 it is exp(x) = exp(-|x|). Both exponents are <= 0, so nothing overflows; for
    # |x| > ~745 exp underflows to exactly 0, which gives the exact limits 0 and 1.
    # No select on the sign (np.where on a random sign makes the CPU mispredict a branch
    # per element), and the same bits as np.where(x >= 0, r, e * r).
    # The numerator needs no second exp: it is max(exp(-|x|), x >= 0) (e where x < 0, as
    # exp(-|x|) <= 1 gives way to 1 where x >= 0; NaN stays NaN).
    # two arrays (r: `out` when given), each step written in place
    e, r = np.empty(x.shape), (np.empty(x.shape) if out is None else out)
    with np.errstate(under="ignore"):
        np.abs(x, out=e)
        np.negative(e, out=e)
        np.exp(e, out=e)  # exp(-|x|), in (0, 1]
        np.add(e, 1.0, out=r)
        np.divide(1.0, r, out=r)  # sigmoid(|x|) = 1 / (1 + exp(-|x|))
        np.maximum(e, x >= 0, out=e)  # exp(min(x, 0))
        np.multiply(r, e, out=r)  # 1 · r, or exp(-|x|) · r = sigmoid(-|x|)
    return r


def sigmoid(a: Any) -> Tensor:
    """Logistic function out = 1 / (1 + exp(-a)), computed without overflow.

    Uses exp(-|a|) <= 1 in both branches, so finite extremes such as ±10 000
    give exactly 0 and 1 with no warning (L4.2).

    Backward:
        a: g * out * (1 - out)

    Example:
        >>> sigmoid(Tensor([-10000.0, 0.0, 10000.0])).data.tolist()
        [0.0, 0.5, 1.0]

    Clauses: L4.2.
    """
    a = _t(a)
    out = _sigmoid_data(a.data)

    def backward(g: np.ndarray):
        return (g * out * (1.0 - out),)

    return Tensor._make(out, (a,), "sigmoid", backward)


def silu(a: Any) -> Tensor:
    """SiLU / swish: out = a * sigmoid(a), with sigmoid's overflow care (L4.2).

    Non-finite inputs promise nothing finite (silu(-inf) is NaN).

    Backward:
        a: g * (s + a * s * (1 - s)), with s = sigmoid(a)

    Example:
        >>> x = Tensor([0.0], requires_grad=True)
        >>> silu(x).sum().backward()
        >>> x.grad.tolist()
        [0.5]

    Clauses: L4.2; Elfwing et al. 2018, used by SwiGLU (Shazeer 2020).
    """
    a = _t(a)
    s = _sigmoid_data(a.data)
    out = a.data * s
    a_data = a.data  # saved for backward

    def backward(g: np.ndarray):
        return (g * (s + a_data * s * (1.0 - s)),)

    return Tensor._make(out, (a,), "silu", backward)


def relu(a: Any) -> Tensor:
    """Rectified linear unit: out = max(a, 0) elementwise.

    Shapes: out like a.

    Backward:
        a: where(out <= 0, 0, g)   (0 at exactly 0, and g passes at NaN: PyTorch's
           threshold_backward, also for an infinite or NaN g where out <= 0)

    Example:
        >>> x = Tensor([-1.0, 0.0, 2.0], requires_grad=True)
        >>> relu(x).sum().backward()
        >>> x.grad.tolist()
        [0.0, 0.0, 1.0]

    Clauses: L4.2 (activations); Nair & Hinton 2010.
    """
    a = _t(a)
    # a where a < 0 is false, else 0: NaN propagates and relu(-0.0) = -0.0, as torch.relu
    # (np.maximum(-0.0, 0.0) would give +0.0)
    out = np.where(a.data < 0, 0.0, a.data)
    blocked = out <= 0  # saved for backward; NaN is not blocked

    def backward(g: np.ndarray):
        return (np.where(blocked, 0.0, g),)

    return Tensor._make(out, (a,), "relu", backward)


def tanh(a: Any) -> Tensor:
    """Hyperbolic tangent: out = tanh(a), exactly ±1 at finite extremes (no overflow).

    Shapes: out like a.

    Backward:
        a: g * (1 - out**2)

    Example:
        >>> x = Tensor([0.0], requires_grad=True)
        >>> tanh(x).sum().backward()
        >>> x.grad.tolist()
        [1.0]

    Clauses: L4.2 (activations); micrograd's neuron.
    """
    a = _t(a)
    out = np.tanh(a.data)

    def backward(g: np.ndarray):
        return (g * (1.0 - out * out),)

    return Tensor._make(out, (a,), "tanh", backward)


def sqrt(a: Any) -> Tensor:
    """Square root: out = sqrt(a); sqrt of a negative is NaN with a warning (like log, L1.2).

    Shapes: out like a.

    Backward:
        a: g / (2 * out)     (at a = 0 this is inf, as torch.sqrt gives)

    Example:
        >>> x = Tensor([4.0], requires_grad=True)
        >>> sqrt(x).sum().backward()
        >>> x.grad.tolist()
        [0.25]

    Clauses: L1.1, L1.2.
    """
    a = _t(a)
    out = np.sqrt(a.data)

    def backward(g: np.ndarray):
        with np.errstate(divide="ignore"):
            return (g / (2.0 * out),)

    return Tensor._make(out, (a,), "sqrt", backward)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715
# math.erf is the C library's erf (correctly rounded to within 1 ulp); np.frompyfunc maps
# it over an array without SciPy (why not SciPy: docs/library.md#gelu).
_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_data(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(x), dtype=np.float64)


def gelu(a: Any, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit, named as PyTorch names it (torch.nn.functional.gelu).

    approximate="none":  out = a * Φ(a) = a/2 * (1 + erf(a / √2))        (exact)
    approximate="tanh":  out = a/2 * (1 + tanh(u)),  u = √(2/π) (a + 0.044715 a³)

    Shapes: out like a.

    Backward:
        a: g * (Φ(a) + a * φ(a)), Φ the normal cdf, φ(a) = exp(-a**2 / 2) / sqrt(2 * pi)
        approximate: not differentiable (with "tanh" the rule is gelu_tanh's)

    Non-finite inputs follow PyTorch: gelu(-inf) is NaN, and the gradient at ±inf is NaN.

    Raises: ValueError when approximate is not "none" or "tanh".

    Example:
        >>> x = Tensor([0.0], requires_grad=True)
        >>> gelu(x).sum().backward()
        >>> x.grad.tolist()
        [0.5]

    Clauses: L4.2 (activations); Hendrycks & Gimpel 2016. erf: Python's math.erf.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    a = _t(a)
    x = a.data  # saved for backward
    if approximate == "none":
        cdf = 0.5 * (1.0 + _erf_data(x / math.sqrt(2.0)))
        with np.errstate(invalid="ignore"):
            out = x * cdf  # gelu(-inf) = -inf * 0 = NaN, as in PyTorch

        def backward(g: np.ndarray):
            with np.errstate(under="ignore", over="ignore", invalid="ignore"):
                pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
                return (g * (cdf + x * pdf),)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x**3))
            out = 0.5 * x * (1.0 + t)

        def backward(g: np.ndarray):
            with np.errstate(over="ignore", invalid="ignore"):
                du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * x * x)
                return (g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du),)

    return Tensor._make(out, (a,), "gelu", backward)



def gelu_tanh(a: Any) -> Tensor:
    """gelu(a, approximate="tanh"): the tanh approximation as one op for the registry.

    Backward:
        a: g * (0.5 * (1 + t) + 0.5 * a * (1 - t**2) * sqrt(2 / pi) * (1 + 3 * 0.044715 *
           a**2)), t = tanh(sqrt(2 / pi) * (a + 0.044715 * a**3))

    Example:
        >>> gelu_tanh(Tensor([0.0])).data.tolist()
        [0.0]

    Clauses: L4.2 (activations); Hendrycks & Gimpel 2016.
    """
    return gelu(a, approximate="tanh")

# ============================================================================
# L5  Cross-entropy
# ============================================================================
def cross_entropy_grad(logits: Any, targets: Any) -> np.ndarray:
    """Gradient of the mean cross-entropy: (softmax(logits) - one_hot(targets)) / N.

    Builds no graph and does not modify `logits`; returns `np.ndarray` (L0.2).

    Shapes: logits (N, V), targets (N,) int -> (N, V).

    Raises: TypeError for non-integer targets; ValueError for mismatched shapes;
    IndexError for a target outside [-V, V) (NumPy's rules).

    Example:
        >>> cross_entropy_grad(np.zeros((1, 2)), np.array([1])).tolist()
        [[0.5, -0.5]]

    Clauses: L5.2, L5.3.
    """
    if isinstance(logits, Tensor):
        logits = logits.data
    logits = np.asarray(logits, dtype=np.float64)
    targets = _int_array(targets, "cross_entropy_grad", "targets")
    cross_entropy_rule(logits.shape, targets)
    return _cross_entropy_grad_data(logits, targets)


def _cross_entropy_grad_data(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """cross_entropy_grad on inputs already checked (the loss's backward checked them once)."""
    n = logits.shape[0]
    grad = _softmax_data(logits, -1)  # a fresh array: safe to modify
    grad[np.arange(n), targets] -= 1.0
    grad /= n
    return grad


def _scale_rows(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a · c with one factor per row, into a new array: a (..., m), c (..., 1) → (..., m).

    The same products as ``a * c``, so the same bits: NumPy runs the broadcast ``a * c``
    by first copying each row's factor out m times into a buffer; einsum multiplies by
    it directly. (In place, ``a *= c`` needs neither.)
    """
    return np.einsum("...j,...->...j", a, c[..., 0])


def cross_entropy(logits: Any, targets: Any) -> Tensor:
    """Mean negative log-likelihood of integer targets under softmax(logits).

    loss = -(1/N) sum_i log_softmax(logits)[i, targets[i]]; logits are raw
    (unnormalised), targets are class indices: no one-hot, no ignore_index, no
    label smoothing, no weights, no reduction option (L5.1). Stable for large
    logits (±1000, 5e3) through the max-shift of log_softmax.

    Shapes: logits (N, V), targets (N,) int -> () scalar.

    Backward:
        logits: g * (softmax(logits) - one_hot(targets)) / N   (cross_entropy_grad)
        targets: not differentiable (L0.6)

    Raises: as cross_entropy_grad. An empty batch gives NaN (L5.3).

    Example:
        >>> logits = Tensor([[0.0, 0.0]], requires_grad=True)
        >>> loss = cross_entropy(logits, np.array([1]))
        >>> loss.backward()
        >>> logits.grad.tolist()
        [[0.5, -0.5]]

    Clauses: L5.1-L5.3.
    """
    logits = _t(logits)
    targets = _int_array(targets, "cross_entropy", "targets")
    cross_entropy_rule(logits.data.shape, targets)
    x = logits.data
    n, rows = x.shape[0], np.arange(x.shape[0])
    if x.size == 0:  # no rows: NumPy's 0/0 = NaN (L5.3), and an empty gradient
        out = -np.sum(_log_softmax_data(x, -1)[rows, targets]) / n
        return Tensor._make(out, (logits,), "cross_entropy", lambda g: (np.zeros(x.shape),))
    # log_softmax's steps (_log_softmax_data), with log sum exp subtracted at the targets
    # only: the same numbers at the targets, and no pass over the whole (N, V) for it
    e = x - x.max(axis=-1, keepdims=True)  # (N, V): shifted, the largest entry 0
    at_targets = e[rows, targets]  # (N,), kept before the exp overwrites them
    np.exp(e, out=e)  # (N, V), in place
    sum_e = e.sum(axis=-1, keepdims=True)  # (N, 1)
    out = -np.sum(at_targets - np.log(sum_e[:, 0])) / n

    def backward(g: np.ndarray):
        # cross_entropy_grad's (softmax - onehot) / N, times g (the loss's 0-d gradient),
        # with softmax = e / sum_e from the forward: no second softmax pass over the logits
        grad = _scale_rows(e, g / (n * sum_e))  # softmax · g/N
        grad[rows, targets] -= g / n
        return (grad,)

    return Tensor._make(out, (logits,), "cross_entropy", backward)


# ============================================================================
# L6  RoPE and K/V repetition
# ============================================================================
def _as_complex_pairs(a: np.ndarray) -> np.ndarray:
    """(..., 2m) float64 → (..., m) complex128: each (even, odd) pair as even + i·odd.
    A view when the last axis is contiguous, else a contiguous copy first."""
    if a.strides[-1] != a.itemsize:
        a = np.ascontiguousarray(a)
    return a.view(np.complex128)


def _rotation(cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """e^{iθ} = cos + i·sin as one complex128 table, shaped like the tables broadcast."""
    shape = cos.shape if cos.shape == sin.shape else np.broadcast_shapes(cos.shape, sin.shape)
    turn = np.empty(shape, dtype=np.complex128)
    turn.real, turn.imag = cos, sin
    return turn


def rope(x: Any, cos: Any, sin: Any) -> Tensor:
    """Rotary position embedding: rotate each adjacent (even, odd) pair by its angle.

    out[..., 2i]   = x[..., 2i] cos - x[..., 2i+1] sin
    out[..., 2i+1] = x[..., 2i] sin + x[..., 2i+1] cos

    Viewing each pair as a complex number x_{2i} + i x_{2i+1}, this is the
    complex product x · e^{iθ} (Su et al. 2021). Tables come from
    `glassllm.layers.rope_angles`; this op makes no angles (L6.2).

    Shapes: x (B, H, n, dk), cos and sin (n, dk/2), broadcasting over B and H
    -> (B, H, n, dk).

    Backward:
        x: the transposed rotation, g rotated by -θ: (g_even * cos + g_odd * sin,
           -g_even * sin + g_odd * cos) for each pair
        cos, sin: not differentiable (L0.6)

    Raises: ValueError if the last axis of x is odd, or the tables do not
    broadcast with the pairs of x.

    Example:
        >>> rope(Tensor([[1.0, 2.0, 3.0, 4.0]]), np.zeros((1, 2)), np.ones((1, 2))).data.tolist()
        [[-2.0, 1.0, -4.0, 3.0]]

    Clauses: L6.1, L6.2; Su et al. 2021 (RoFormer).
    """
    x = _t(x)
    cos = _constant(cos, "rope", "cos")
    sin = _constant(sin, "rope", "sin")
    rope_rule(x.data.shape, cos.shape, sin.shape)
    # the complex product itself: each (even, odd) pair of x read as one complex128, the
    # angles as e^{iθ} = cos + i sin; out = x · e^{iθ}, read back as pairs
    turn = _rotation(cos, sin)  # (n, dk/2): e^{iθ}
    out = (_as_complex_pairs(x.data) * turn).view(np.float64)  # (..., dk), shaped like x
    x_data = x.data  # saved for backward

    def backward(g: np.ndarray):
        gx = _as_complex_pairs(g) * np.conj(turn)  # g · e^{-iθ}: the transposed rotation
        return (gx.view(np.float64).reshape(x_data.shape),)  # shaped like x (checked above)

    return Tensor._make(out, (x,), "rope", backward)


# repeat_kv's backward adds up to this many copies slice by slice, more with one
# .sum(axis=2): the same sums, in the same order, and never a Python loop over a count the
# caller chooses (docs/performance.md has what each way costs).
_LOOP_REPEATS = 4


def repeat_kv(x: Any, repeats: int) -> Tensor:
    """Repeat each key/value head `repeats` times, adjacent copies together.

    Heads come out as (head 0, head 0, head 1, head 1, ...) for repeats=2, the
    order grouped-query attention expects (Ainslie et al. 2023; Meta's llama).

    Shapes: x (B, Hkv, n, dk) -> (B, Hkv * repeats, n, dk).

    Backward:
        x: g.reshape(B, Hkv, repeats, n, dk).sum(axis=2)  (regroup, sum the copies)
        repeats: not differentiable (L0.6)

    Raises: TypeError if repeats is not an int; ValueError if repeats < 1 or x
    is not 4-D.

    Example:
        >>> heads = Tensor(np.array([1.0, 2.0]).reshape(1, 2, 1, 1))
        >>> repeat_kv(heads, 2).data.ravel().tolist()
        [1.0, 1.0, 2.0, 2.0]

    Clauses: L6.3.
    """
    x = _t(x)
    repeat_kv_rule(x.data.shape, repeats)
    repeats = int(repeats)  # a NumPy uint8 would keep its dtype in later arithmetic
    b, hkv, n, dk = x.data.shape
    # np.repeat(x, repeats, axis=1), written as one broadcast copy: np.repeat would copy
    # a read-only input (every Tensor's data) once more first
    out = np.empty((b, hkv, repeats, n, dk))
    out[...] = x.data[:, :, None]  # each head's copies side by side: h0 h0 h1 h1
    out = out.reshape(b, hkv * repeats, n, dk)  # (B, Hkv*repeats, n, dk)

    def backward(g: np.ndarray):
        copies = g.reshape(b, hkv, repeats, n, dk)  # (B, Hkv, repeats, n, dk)
        if repeats == 1:
            return (copies[:, :, 0].copy(),)
        if repeats > _LOOP_REPEATS:  # the user picks repeats: no Python loop over it
            return (copies.sum(axis=2),)
        gx = copies[:, :, 0] + copies[:, :, 1]  # the sum over the copies, one contiguous
        for i in range(2, repeats):  # add each: what .sum(axis=2) computes, in its order
            gx += copies[:, :, i]
        return (gx,)

    return Tensor._make(out, (x,), "repeat_kv", backward)

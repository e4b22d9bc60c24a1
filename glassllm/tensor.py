"""The `Tensor` and its reverse-mode engine: the heart of glassllm.

A `Tensor` wraps a float64 NumPy array (`data`). When it is made by an op from
inputs that require a gradient, it also remembers its `_parents` and a
`_backward` closure: given `g`, the gradient of the final scalar with respect to
this tensor (the *incoming* gradient, PyTorch's `grad_output`), the closure returns
the vector-Jacobian products for each parent.

`Tensor.backward()` walks the graph once in reverse topological order (an
iterative sort, so a 10 000-op chain is fine), accumulating gradients with `+`
wherever a tensor is used more than once (diamond graphs), and adds the result
into the `.grad` of every leaf that requires grad (L0.5).

`no_grad` (glassllm/grad_mode.py) switches graph building off for the current thread /
async task only (H6); it is re-exported here.

Clauses: L0.1-L0.7 of the contract (docs/library.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from glassllm.grad_mode import _GRAD_ENABLED, is_grad_enabled, no_grad
from glassllm.shapes import summed_axes

__all__ = ["Tensor", "is_grad_enabled", "no_grad", "summed_axes", "unbroadcast"]

# ----------------------------------------------------------------------------
# Broadcasting helpers (L0.5): the one place that sums gradients back.
# ----------------------------------------------------------------------------
def unbroadcast(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `grad` over the axes broadcasting expanded, so it has `shape` (L0.5).

    >>> unbroadcast(np.ones((2, 3)), (3,)).tolist()
    [2.0, 2.0, 2.0]
    >>> unbroadcast(np.ones((2, 3)), (2, 1)).tolist()
    [[3.0], [3.0]]
    """
    gshape = grad.shape
    if gshape == shape:
        return grad
    extra = len(gshape) - len(shape)
    if extra > 0 and shape and gshape[extra:] == shape:  # only leading axes were added
        return grad.sum(axis=0 if extra == 1 else tuple(range(extra)))
    # one sum over every expanded axis; reshape drops the leading ones keepdims kept
    return grad.sum(axis=summed_axes(gshape, shape), keepdims=True).reshape(shape)


BackwardFn = Callable[[np.ndarray], Sequence["np.ndarray | None"]]


# ----------------------------------------------------------------------------
# Tensor
# ----------------------------------------------------------------------------
class Tensor:
    """A float64 array that can record how it was made and carry a gradient.

    Args:
        data: real numbers: a number, a nested list, an ndarray or another Tensor.
            Ints and bools become float64 (no integer gradients). The data is copied.
        requires_grad: make this a leaf whose `.grad` is filled by `backward()`.

    `data` is read-only (see `Tensor.data`): assign a new array to change it.

    Raises:
        TypeError: complex, string, None or other non-numeric data (L0.7).
        ValueError: a ragged nested list (NumPy's message).

    Attributes:
        data: `np.ndarray`, float64.
        grad: None until a backward pass reaches this leaf, then an ndarray shaped
            like `data`; later passes add to it (like PyTorch).
        requires_grad: whether gradients flow to / through this tensor.

    Operators `+ - * / ** @`, unary `-`, their reflected forms (`2 - t`, `1 / t`),
    indexing and the methods `.sum() .mean() .max() .reshape() .transpose() .T`
    all delegate to the functional ops of `glassllm.autograd` (L1.1, L2.1).

    Example:
        >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> x.grad.tolist()
        [[2.0, 4.0], [6.0, 8.0]]
    """

    __slots__ = ("_backward", "_data", "_grad", "_op", "_parents", "_retain", "requires_grad")
    # Make NumPy defer to our reflected operators: `np.ones(2) + t` -> t.__radd__.
    __array_ufunc__ = None

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        self.data = data  # validated, copied and made read-only by the setter below
        self._grad: np.ndarray | None = None
        self.requires_grad: bool = bool(requires_grad)
        self._parents: tuple[Tensor, ...] = ()
        self._backward: BackwardFn | None = None
        self._op: str = ""
        self._retain: bool = False

    @classmethod
    def _make(
        cls, data: Any, parents: tuple[Tensor, ...], op: str, backward: BackwardFn
    ) -> Tensor:
        """Build an op's result; it joins the graph only if a parent requires grad (L0.3).

        Called once per op, so it is kept lean (a loop, not `any()` over a generator).
        """
        t = cls.__new__(cls)
        if type(data) is not np.ndarray or data.dtype is not _F64:
            data = np.asarray(data, dtype=np.float64)
        data.setflags(write=False)  # backward closures keep it: never change it in place
        t._data = data
        t._grad = None
        t._op = op
        t._retain = False
        needs_grad = False
        if _GRAD_ENABLED.get():
            for p in parents:
                if p.requires_grad:
                    needs_grad = True
                    break
        t.requires_grad = needs_grad
        t._parents = parents if needs_grad else ()
        t._backward = backward if needs_grad else None
        return t

    # -- the data: read-only, so a backward pass always sees what the forward saw --
    @property
    def data(self) -> np.ndarray:
        """The values, a read-only float64 ndarray.

        Ops keep references to their inputs' data for the backward pass, so changing it
        in place would silently corrupt gradients (a classic autograd bug); NumPy refuses
        (`ValueError: assignment destination is read-only`). To change a tensor's values,
        assign a new array: `t.data = t.data - lr * t.grad` (graphs built before keep the
        old values).
        """
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, Tensor):
            value = value._data
        raw = np.asarray(value)
        if raw.dtype.kind not in "biuf":  # bool, signed, unsigned, float
            raise TypeError(
                "Tensor data must be real numbers (L0.7): numbers, bools or nested lists of "
                f"them, got {type(value).__name__} of dtype {raw.dtype}"
            )
        arr = np.array(raw, dtype=np.float64)  # always a copy that nobody else holds
        arr.flags.writeable = False
        self._data = arr

    def _take_data(self, array: np.ndarray) -> None:
        """Make `array` the data as it is, without the setter's checks and copy.

        For an optimizer's update: `array` must be a new float64 array of this tensor's
        shape that nobody else holds (it is made read-only here, as the setter's copy is).
        """
        array.flags.writeable = False
        self._data = array

    @property
    def grad(self) -> np.ndarray | None:
        """dL/dself from the backward passes so far (summed), shaped like `data`; or None."""
        return self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None:
            self._grad = None
            return
        arr = np.array(value.data if isinstance(value, Tensor) else value, dtype=np.float64)
        if arr.shape != self._data.shape:
            raise ValueError(
                f"grad must have the tensor's shape {self._data.shape} (L0.5), got {arr.shape}"
            )
        self._grad = arr

    # -- small properties -----------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def op(self) -> str:
        """Name of the op that made this tensor ('' for a leaf)."""
        return self._op

    @property
    def is_leaf(self) -> bool:
        return self._backward is None

    def __repr__(self) -> str:
        body = np.array2string(self.data, separator=", ", precision=6, threshold=64,
                               prefix="Tensor(")   # rows line up, as in NumPy's repr
        extra = ", requires_grad=True" if self.requires_grad else ""
        extra += f", op={self._op!r}" if self._op else ""
        return f"Tensor({body}{extra})"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from glassllm.apps import display  # a notebook's picture, when one asks
        return display.tensor_bundle(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # np.asarray(t) gives the (read-only) data, np.array(t) a writable copy; either way
        # a constant: NumPy functions build no graph.
        arr = self._data if dtype is None else self._data.astype(dtype)
        return arr.copy() if copy and arr is self._data else arr

    # -- Python's protocols: truth, length, iteration, scalars (as NumPy and PyTorch) ---
    def __bool__(self) -> bool:
        """A one-element tensor's truth is its value; any other size is ambiguous.

        Without this, Python would use ``__len__``: ``bool(Tensor([0.0]))`` would be
        True and ``bool(Tensor(0.0))`` a "len() of unsized object" TypeError.
        """
        if self.data.size != 1:
            raise ValueError(
                f"The truth value of a Tensor with {self.data.size} elements (shape "
                f"{self.shape}) is ambiguous; reduce it first (e.g. t.max(), t.sum()) "
                "or compare t.item()"
            )
        return bool(self.data.reshape(()))

    def __len__(self) -> int:
        """The size of the first axis; a 0-d tensor has no length (TypeError)."""
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor: it has no axes (use .item() for its value)")
        return len(self.data)

    def __iter__(self) -> Iterator[Tensor]:
        """Sub-tensors along the first axis, each ``self[i]`` (in the graph)."""
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor: it has no axes")
        return (self[i] for i in range(len(self.data)))

    def __contains__(self, value: Any) -> bool:
        """``x in t`` is True when some element equals x, as ``(t == x).any()`` in NumPy.

        Tensor ``==`` is identity (Python's default, which keeps ``hash`` consistent:
        tensors can be set members and dict keys, as in PyTorch), so this compares data.
        """
        other = value.data if isinstance(value, Tensor) else np.asarray(value)
        return bool(np.any(self.data == other))

    def _scalar(self, kind: str) -> float:
        if self.data.size != 1:
            raise ValueError(
                f"only one-element tensors can be converted to Python scalars ({kind}()), "
                f"got shape {self.shape}"
            )
        return float(self.data.reshape(()))

    def __float__(self) -> float:
        return self._scalar("float")

    def __int__(self) -> int:
        return int(self._scalar("int"))  # truncates toward zero, like int(2.7) and PyTorch

    def __index__(self) -> int:
        raise TypeError(
            "a Tensor cannot be used as an index or a count: its data is float64 (L0.7); "
            "pass an int, or an integer NumPy array"
        )

    def item(self) -> float:
        """The value of a one-element tensor as a Python float (ValueError otherwise)."""
        if self.data.size != 1:
            raise ValueError(
                f"item() needs a tensor with exactly one element, got shape {self.shape}"
            )
        return float(self.data.reshape(()))

    def numpy(self) -> np.ndarray:
        """The data as an ndarray: shared, not copied, and read-only (see `data`)."""
        return self.data

    def detach(self) -> Tensor:
        """A constant Tensor sharing this tensor's data, cut from the graph."""
        t = Tensor.__new__(Tensor)
        t._data, t._grad, t.requires_grad = self._data, None, False
        t._parents, t._backward, t._op, t._retain = (), None, "", False
        return t

    def zero_grad(self) -> None:
        """Forget the accumulated gradient (`.grad = None`)."""
        self.grad = None

    def retain_grad(self) -> Tensor:
        """Keep the gradient of this non-leaf tensor in `.grad` during backward."""
        self._retain = True
        return self

    # -- the engine -------------------------------------------------------------
    def backward(self, grad_output: Any = None) -> None:
        """Reverse-mode differentiation from this tensor (the chain rule, L0.5).

        Args:
            grad_output: the gradient of some scalar with respect to this tensor,
                shaped like it (vector-Jacobian product seed). May be omitted only
                for a one-element tensor, where it defaults to 1.

        The walk: every tensor this one depends on, in reverse topological order (each
        after every tensor computed from it); a tensor's gradient is complete when its
        turn comes, and its op's backward turns it into its inputs' gradients (one
        vector-Jacobian product each), which add up wherever a tensor is used more than
        once. Every leaf that requires grad (and every tensor marked with
        `retain_grad()`) gets `.grad += dL/dtensor`, shaped like its data: an array only
        that leaf holds (`_Gradients` says when one can be handed over without a copy).

        Raises:
            RuntimeError: this tensor does not require grad (no graph to walk).
            ValueError: `grad_output` omitted for a tensor with more than one
                element, or its shape differs from this tensor's.
        """
        seed = _seed(self, grad_output)  # float64, shaped like this tensor
        if _one_op_on_leaves(self, seed):  # a shortcut, the same rules (docs/performance.md)
            return
        pending = _Gradients(self, seed)  # the gradients waiting for their tensor
        for node in reversed(_topological_order(self)):
            g = pending.pop(node)
            if g is None:  # nothing flows here
                continue
            if node._backward is None:  # a leaf: its .grad += g
                pending.give_leaf(node, g)
                continue
            if node._retain:  # asked to keep its gradient: always its own copy
                node._grad = np.array(g, dtype=np.float64) if node._grad is None else node._grad + g
            for parent, pg in zip(node._parents, node._backward(g), strict=True):
                if pg is not None and parent.requires_grad:
                    pending.add(node, parent, pg)

    # -- operators delegate to glassllm.autograd, which imports this module: the import
    # is made at call time (_ops), the one circle the layering allows ---
    def __add__(self, other: Any) -> Tensor:
        return _ops().add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _ops().add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _ops().sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _ops().sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _ops().mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _ops().mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _ops().div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _ops().div(other, self)

    def __neg__(self) -> Tensor:
        return _ops().neg(self)

    def __pos__(self) -> Tensor:
        return self

    def __pow__(self, exponent: Any) -> Tensor:
        return _ops().pow(self, exponent)

    def __rpow__(self, base: Any) -> Tensor:
        return _ops()._rpow(base, self)  # the base is a constant, t is differentiable

    def __matmul__(self, other: Any) -> Tensor:
        return _ops().matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _ops().matmul(other, self)

    def __getitem__(self, index: Any) -> Tensor:
        return _ops().getitem(self, index)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops().tsum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops().mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops().max(self, axis=axis, keepdims=keepdims)

    def exp(self) -> Tensor:
        return _ops().exp(self)

    def log(self) -> Tensor:
        return _ops().log(self)

    def reshape(self, *shape: Any) -> Tensor:
        """`t.reshape(2, 3)` or `t.reshape((2, 3))`, like NumPy."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return _ops().reshape(self, shape)

    def transpose(self, *axes: Any) -> Tensor:
        """`t.transpose()` reverses the axes; `t.transpose(1, 0, 2)` permutes them."""
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
            axes = axes[0]
        return _ops().transpose(self, axes if axes else None)

    @property
    def T(self) -> Tensor:
        """All axes reversed, like `ndarray.T`."""
        return _ops().transpose(self, None)


_F64 = np.dtype(np.float64)


def _seed(root: Tensor, grad_output: Any) -> np.ndarray:
    """The gradient `root.backward(grad_output)` starts from, as float64: grad_output, or
    1 for a one-element root. The errors of `Tensor.backward`."""
    if not root.requires_grad:
        raise RuntimeError(
            "backward(): this tensor does not require grad; make an input with "
            "Tensor(..., requires_grad=True) and do not build it under no_grad"
        )
    data = root._data
    if grad_output is None:
        if data.size != 1:
            raise ValueError(
                f"backward(): the output has shape {data.shape}, not one element; pass "
                "grad_output (an array of that shape) or reduce it first, e.g. .sum()"
            )
        return np.ones(data.shape)
    seed = grad_output
    if type(seed) is not np.ndarray or seed.dtype is not _F64:  # a float64 array: as it is
        seed = np.asarray(seed._data if isinstance(seed, Tensor) else seed, dtype=np.float64)
    if seed.shape != data.shape:
        raise ValueError(
            f"backward(): grad_output has shape {seed.shape} but the output has "
            f"shape {data.shape}; they must match"
        )
    return seed


class _Gradients:
    """The gradients waiting for their tensor during one backward pass (HIPS autograd's
    outgrads and `add_outgrads`), and the one place that decides when a leaf may keep a
    gradient array as it is.

    A leaf's `.grad` must be an array only that leaf holds. An array a backward returns
    may be reachable elsewhere: sent to two inputs (add's `g` for both), the caller's
    seed, a view of `g`. So a leaf is handed an array without a copy only when the engine
    knows nobody else can reach it: its own buffer (not a view, writeable, float64) that
    went to exactly one place — a backward's new array sent once, or a sum made here
    (`a + b`, a new array: never `a += b`, which would write into an array an op may
    still share). `sent` holds the id of every array sent, `shared` of those sent twice
    (the seed is in both). An id freed and reused only costs a needless copy: an array
    sent twice is alive both times. Backward closures return new arrays or views of `g`,
    never an array they keep: the contract every op in glassllm.autograd follows.
    """

    def __init__(self, root: Tensor, seed: np.ndarray) -> None:
        self.grads: dict[Tensor, np.ndarray] = {root: seed}  # tensors hash by identity
        self.sent: set[int] = {id(seed)}
        self.shared: set[int] = {id(seed)}

    def pop(self, t: Tensor) -> np.ndarray | None:
        """t's whole gradient (its turn has come), or None if none flowed to it."""
        return self.grads.pop(t, None)

    def add(self, node: Tensor, parent: Tensor, g: np.ndarray) -> None:
        """`g`, the gradient node's backward gave `parent`, joins parent's gradient."""
        if g.shape != parent._data.shape:
            _check_shape(node, g, parent)
        key = id(g)
        if key in self.sent:
            self.shared.add(key)
        else:
            self.sent.add(key)
        grads = self.grads
        grads[parent] = g if parent not in grads else grads[parent] + g

    def give_leaf(self, leaf: Tensor, g: np.ndarray) -> None:
        """`leaf.grad += g`, handing `g` over when it went to this leaf alone."""
        _give_leaf(leaf, g, id(g) not in self.shared)


def _give_leaf(leaf: Tensor, g: np.ndarray, alone: bool) -> None:
    """Add `g` into `leaf.grad`; hand the array over when it is `alone` and its own buffer.

    `alone`: no other input or the caller holds this array (the engine's bookkeeping).
    Its own buffer: float64, not a view (`base is None`), writeable. Anything else is
    copied, so a leaf's `.grad` is always an array only that leaf holds.
    """
    if leaf._grad is not None:
        leaf._grad = leaf._grad + g
    elif alone and g.base is None and g.dtype is _F64 and g.flags.writeable:
        leaf._grad = g  # handed over: nobody else holds this array
    else:
        leaf._grad = np.array(g, dtype=np.float64)


def _check_shape(node: Tensor, pg: np.ndarray, parent: Tensor) -> None:
    """An op's backward must give each input a gradient of its shape (an op's bug, never
    the user's)."""
    if pg.shape != parent._data.shape:
        raise AssertionError(
            f"{node._op} backward gave a gradient of shape {pg.shape} "
            f"for an input of shape {parent._data.shape}"
        )


def _one_op_on_leaves(root: Tensor, seed: np.ndarray) -> bool:
    """The walk's shortcut for one op on one or two distinct leaves (every sandbox op
    call, the last step of many graphs): the op's backward called once and each leaf
    given its gradient under `_Gradients`' rules, without its bookkeeping. Returns False,
    having done nothing, for any other graph. docs/performance.md has what it saves."""
    fn, parents = root._backward, root._parents
    if fn is None or root._retain or parents[0]._backward is not None:
        return False
    if len(parents) != 1 and (len(parents) > 2 or parents[1]._backward is not None
                              or parents[0] is parents[1]):
        return False  # not two distinct leaves (add(x, x) sums its two uses in the walk)
    grads = fn(seed)
    if len(grads) != len(parents):
        raise AssertionError(f"{root._op} backward gave {len(grads)} gradients")
    shared = len(grads) == 2 and grads[0] is grads[1]  # one array sent to both inputs
    for parent, g in zip(parents, grads):  # noqa: B905 (the lengths are checked above)
        if g is not None and parent.requires_grad:
            if g.shape != parent._data.shape:
                _check_shape(root, g, parent)
            _give_leaf(parent, g, g is not seed and not shared)
    return True


def _topological_order(root: Tensor) -> list[Tensor]:
    """Every tensor `root` depends on (through grad-requiring edges), parents first.

    Iterative depth-first post-order: no recursion, so graph depth is unbounded. A node
    is pushed once more (as its own marker, after its parents) and listed when popped
    the second time. Tensors hash by identity, so the visited set holds them directly.
    """
    order: list[Tensor] = []
    parents = root._parents
    if all(not p._parents for p in parents):
        # One op on leaves (each sandbox op call, the first step of every graph): no walk.
        # Identities, not `in` on a list: == on tensors is elementwise.
        seen: set[int] = set()
        for p in parents:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                order.append(p)
        order.append(root)
        return order
    visited: set[Tensor] = set()
    done: set[Tensor] = set()
    stack: list[Tensor] = [root]
    while stack:
        node = stack.pop()
        if node in visited:
            if node not in done:  # second time: its parents are all listed
                done.add(node)
                order.append(node)
            continue
        visited.add(node)
        stack.append(node)
        for parent in node._parents:
            if parent.requires_grad and parent not in visited:
                stack.append(parent)
    return order


_AUTOGRAD = None


def _ops():
    """glassllm.autograd, imported on first use (it imports this module)."""
    global _AUTOGRAD
    if _AUTOGRAD is None:
        from glassllm import autograd

        _AUTOGRAD = autograd
    return _AUTOGRAD

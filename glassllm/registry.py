"""The op registry (SPEC H1): every op of `glassllm.autograd` (and `glassllm.layers`) described
once, as data — the single source for the service's dispatch and validation, its OpenAPI
schema, the page's op list and the expression evaluator.

Each `Op` holds its function, a summary, the clause it implements, its inputs (name, kind,
differentiable or not, default, shape in glossary letters), its output kind and runnable
examples in the wire format of `glassllm.wire`. Each op also has a **shape plan**: a
function that, from the input shapes and values alone, computes the output shape, the size
of every large intermediate (forward and backward: each matmul's output and gradients,
attention's (B, H, n, n) scores, SwiGLU's F-wide hidden) and the matmul multiply-adds of
forward + backward — before any compute, so a broadcast, `repeat_kv`, index or layer that
would explode is refused up front (H5). A plan costs time proportional to its inputs,
never to its result: `glassllm.shapes` says how (the zero-byte `probe` for reshape and
broadcast, `index_shape` for indexing, `matmul_cost` for products).

Pure Python + NumPy: no web framework here. Shape letters: see STYLE.md's glossary.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from glassllm import Tensor, autograd, layers, no_grad
from glassllm.shapes import ShapeError, index_shape, matmul_cost, matmul_shape, probe
from glassllm.wire import ARRAY_KINDS, LimitError, WireError, coerce, encode_array

__all__ = [
    "OPS",
    "REQUIRED",
    "Example",
    "Input",
    "LimitError",
    "Op",
    "OpResult",
    "Plan",
    "check_grad_output_has_a_backward",
    "check_limits",
    "check_requires_grad",
    "coerce_inputs",
    "example_answer",
    "get",
    "matmul_shape",
    "plan",
    "probe",
    "run",
]

REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()

L06 = ("gradients flow to Tensors only, never to index selectors, masks, constant exponents,"
       " repeat counts or trig tables (SPEC L0.6)")


# --------------------------------------------------------------------------------------
# the data types
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Input:
    name: str
    kind: str                       # a kind of glassllm.wire (tensor, int_array, axis, ...)
    doc: str
    differentiable: bool = False
    default: Any = REQUIRED
    shape: str | None = None        # glossary letters, e.g. "(N, V)"

    @property
    def dtype(self) -> str | None:
        return {"tensor": "float64", "array": "float64", "table": "float64",
                "int_array": "int64", "bool_mask": "bool", "number": "float64",
                "int": "int64", "bool": "bool"}.get(self.kind)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype,
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

    @property
    def size(self) -> int:
        return math.prod(self.shape)


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

    @property
    def differentiable(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.differentiable)

    def input(self, name: str) -> Input:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    def describe(self) -> dict:
        return {"name": self.name, "summary": self.summary, "clause": self.clause,
                "module": self.module, "output": self.output,
                "inputs": [i.describe() for i in self.inputs],
                "examples": [{**e.describe(), "expected": example_answer(self.name, i)}
                             for i, e in enumerate(self.examples)]}


@dataclass
class OpResult:
    value: np.ndarray
    grads: dict[str, np.ndarray]


# --------------------------------------------------------------------------------------
# shape plans
# --------------------------------------------------------------------------------------

def _shape(args: Mapping, name: str) -> tuple[int, ...]:
    return np.shape(args[name])


def elementwise(*names: str) -> Callable[[dict], Plan]:
    """Output = the broadcast of the named inputs (L0.4)."""
    def plan_(args: dict) -> Plan:
        return Plan(np.broadcast_shapes(*(_shape(args, n) for n in names)), names)
    return plan_


def same_as(name: str, *also: str) -> Callable[[dict], Plan]:
    def plan_(args: dict) -> Plan:
        return Plan(_shape(args, name), (name, *also))
    return plan_


def _reduce(args: dict) -> Plan:
    shape = _shape(args, "a")
    axis, keepdims = args.get("axis"), args.get("keepdims", False)
    axes = tuple(range(len(shape))) if axis is None else normalize_axis_tuple(axis, len(shape))
    out = tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)
    return Plan(out, ("a",))


def _along_axis(args: dict) -> Plan:
    name = "a" if "a" in args else "x"
    shape = _shape(args, name)
    normalize_axis_index(args.get("axis", -1), len(shape))
    return Plan(shape, (name,))


def _product(sa: tuple[int, ...], sb: tuple[int, ...], names: str
             ) -> tuple[tuple[int, ...], list[tuple[str, int]], int]:
    """One matmul inside a plan: its output shape, the arrays it and its backward build
    (output, both gradients), named by `names`, and its multiply-adds (forward + backward)."""
    out, sizes, madds = matmul_cost(sa, sb)
    return out, [(names, n) for n in sizes], madds


def _matmul_plan(a: str, b: str) -> Callable[[dict], Plan]:
    """a @ b (matmul; linear is x @ weight)."""
    def plan_(args: dict) -> Plan:
        out, sizes, madds = _product(_shape(args, a), _shape(args, b), f"{a}, {b}")
        return Plan(out, (a, b), tuple(sizes), madds, f"{a}, {b}")
    return plan_


_matmul = _matmul_plan("a", "b")


def _reshape(args: dict) -> Plan:
    return Plan(probe(_shape(args, "a")).reshape(args["shape"]).shape, ("a",))


def _transpose(args: dict) -> Plan:
    return Plan(probe(_shape(args, "a")).transpose(args.get("axes")).shape, ("a",))


def _getitem(args: dict) -> Plan:
    # from the index arrays' shapes, not by indexing a probe: that walks every result position
    return Plan(index_shape(_shape(args, "a"), args["index"]), ("a", "index"))


def _embedding(args: dict) -> Plan:
    return Plan(index_shape(_shape(args, "weight"), args["ids"]), ("weight", "ids"))  # S + (d,)


def _logits_targets(args: dict) -> tuple[int, ...]:
    """cross_entropy's checks (L5.1, L5.3), with autograd's messages: logits (N, V), targets
    (N,), every target inside [-V, V) (NumPy's IndexError, as the library's gather)."""
    logits, targets = _shape(args, "logits"), _shape(args, "targets")
    if len(logits) != 2:
        raise ShapeError("logits", f"cross_entropy: logits must have shape (N, V), got {logits}")
    if targets != (logits[0],):
        raise ShapeError("targets", f"cross_entropy: targets must have shape (N,) ="
                                    f" ({logits[0]},) to match logits {logits}, got {targets}")
    index_shape(logits, (np.arange(logits[0]), np.asarray(args["targets"])))
    return logits


def _cross_entropy(args: dict) -> Plan:
    logits = _logits_targets(args)
    return Plan((), ("logits",), (("logits", math.prod(logits)),))


def _cross_entropy_grad(args: dict) -> Plan:
    return Plan(_logits_targets(args), ("logits", "targets"))


def _rope(args: dict) -> Plan:
    """rope's output is shaped like x (L6.1): the tables broadcast *to* x's pairs, never
    beyond them (autograd.rope's rule and message)."""
    x, cos, sin = _shape(args, "x"), _shape(args, "cos"), _shape(args, "sin")
    if not x or x[-1] % 2:
        raise ShapeError("x", f"rope: the last axis of x holds (even, odd) coordinate pairs and"
                              f" must have even length; x has shape {x}")
    pairs = (*x[:-1], x[-1] // 2)
    if np.broadcast_shapes(pairs, cos, sin) != pairs:                 # NumPy's error if they clash
        clash = [n for n, t in (("cos", cos), ("sin", sin))
                 if np.broadcast_shapes(pairs, t) != pairs]
        raise ShapeError(", ".join(clash), f"rope: cos {cos} and sin {sin} must broadcast to the"
                                           f" pairs of x, {pairs} for x {x}: the output is"
                                           " shaped like x (L6.1)")
    return Plan(x, ("x", "cos", "sin"))


def _repeat_kv(args: dict) -> Plan:
    x, repeats = _shape(args, "x"), args["repeats"]
    if repeats < 1:
        raise WireError("repeats", f"must be a positive integer (L6.3); got {repeats}")
    if len(x) != 4:
        raise ShapeError("x", f"repeat_kv: x must have shape (B, Hkv, n, dk), got {x}")
    return Plan((x[0], x[1] * repeats, x[2], x[3]), ("x", "repeats"))


# --------------------------------------------------------------------------------------
# the ops, in SPEC order (L1 … L6)
# --------------------------------------------------------------------------------------

def T(name: str, doc: str = "a tensor", shape: str | None = None) -> Input:
    """A differentiable tensor input."""
    return Input(name, "tensor", doc, differentiable=True, shape=shape)


def C(name: str, kind: str, doc: str, default: Any = REQUIRED, shape: str | None = None) -> Input:
    """A constant (non-differentiable) input."""
    return Input(name, kind, doc, default=default, shape=shape)


def ex(title: str, clause: str | None = None, **inputs: Any) -> Example:
    return Example(title, inputs, clause)


AXIS = C("axis", "axis", "axis or axes to reduce; null reduces all", default=None)
KEEPDIMS = C("keepdims", "bool", "keep reduced axes with size 1", default=False)
SOFTMAX_AXIS = C("axis", "int", "the axis that sums to 1", default=-1)
LOG2 = math.log(2.0)

_BINARY = {"add": "a + b", "sub": "a - b", "mul": "a * b (elementwise)", "div": "a / b"}
_UNARY = {"neg": ("-a", [1.0, -2.0]), "exp": ("e**a (no clipping, L1.2)", [0.0, 1.0]),
          "log": ("natural log; log(0) = -inf with a warning (L1.2)", [1.0, 2.718281828459045])}

_ops: list[Op] = []
for _name, _math in _BINARY.items():
    _ops.append(Op(_name, getattr(autograd, _name), f"{_math}, with NumPy broadcasting", "L1.1",
                   (T("a"), T("b")), elementwise("a", "b"),
                   examples=(ex(f"{_name} with broadcasting", a=[[1.0, 2.0], [3.0, 4.0]],
                                b=[10.0, 20.0]),)))
for _name, (_math, _x) in _UNARY.items():
    _ops.append(Op(_name, getattr(autograd, _name), _math, "L1.1", (T("a"),), same_as("a"),
                   examples=(ex(_name, a=_x),)))

_ops += [
    Op("pow", autograd.pow, "a ** exponent; the exponent is a constant (L0.6)", "L1.1",
       (T("a"), C("exponent", "array", "constant exponent, a number or array")),
       elementwise("a", "exponent"), examples=(ex("square", a=[1.0, 2.0, 3.0], exponent=2),)),
    Op("rpow", autograd._rpow, "base ** exponent with a constant base, e.g. 2 ** t (the"
       " reflected power, L1.1); the base is a constant (L0.6)", "L1.1",
       (C("base", "array", "constant base, a number or array"), T("exponent")),
       elementwise("base", "exponent"),
       examples=(ex("powers of two", base=2.0, exponent=[0.0, 1.0, 3.0]),)),
    Op("matmul", autograd.matmul, "a @ b, as np.matmul (1-D operands, batched broadcasting)",
       "L1.1", (T("a", shape="(…, n, k)"), T("b", shape="(…, k, m)")), _matmul,
       examples=(ex("2×2 @ 2×1", a=[[1.0, 2.0], [3.0, 4.0]], b=[[1.0], [1.0]]),)),
    # L2 reductions, shape and selection
    Op("tsum", autograd.tsum, "sum over axis (all axes when null)", "L2.1",
       (T("a"), AXIS, KEEPDIMS), _reduce,
       examples=(ex("column sums", a=[[1.0, 2.0], [3.0, 4.0]], axis=0),)),
    Op("mean", autograd.mean, "mean over axis (all axes when null)", "L2.1",
       (T("a"), AXIS, KEEPDIMS), _reduce,
       examples=(ex("row means", a=[[1.0, 2.0], [3.0, 5.0]], axis=1, keepdims=True),)),
    Op("max", autograd.max, "max over axis; ties split the gradient equally (L2.5)", "L2.1",
       (T("a"), AXIS, KEEPDIMS), _reduce,
       examples=(ex("a tie splits the gradient", "L2.5", a=[1.0, 3.0, 3.0]),)),
    Op("reshape", autograd.reshape, "the same elements in a new shape (-1 inferred once)",
       "L2.2", (T("a"), C("shape", "shape", "the new shape")), _reshape,
       examples=(ex("2×3 → 3×2", a=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], shape=[3, -1]),)),
    Op("transpose", autograd.transpose, "permute axes (reverse them when null)", "L2.2",
       (T("a"), C("axes", "axes", "the permutation", default=None)), _transpose,
       examples=(ex("matrix transpose", a=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),)),
    Op("getitem", autograd.getitem, "a[index], NumPy basic and advanced indexing; the backward"
       " scatter-adds into repeated positions", "L2.2",
       (T("a"), C("index", "index", 'a NumPy index as JSON: an item or a list of items — int,'
                  ' null (new axis), "...", {"start","stop","step"}, {"array": ints},'
                  ' {"mask": bools}')), _getitem,
       examples=(ex("repeated rows scatter-add", a=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
                    index=[{"array": [0, 0, 2]}]),
                 ex("a slice and a column", a=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
                    index=[{"start": 1}, 0]))),
    Op("where", autograd.where, "condition ? a : b elementwise; condition is a boolean mask",
       "L2.2", (C("condition", "bool_mask", "boolean mask (L2.3)"), T("a"), T("b")),
       elementwise("condition", "a", "b"),
       examples=(ex("pick by mask", condition=[True, False, True], a=[1.0, 2.0, 3.0],
                    b=[10.0, 20.0, 30.0]),)),
    # L3 embedding and mask
    Op("embedding", autograd.embedding, "rows of weight selected by integer ids, no one-hot;"
       " the backward scatter-adds (L3.2)", "L3.1",
       (T("weight", "the embedding table", "(V, d)"),
        C("ids", "int_array", "integer row ids, any shape S (negative ids index from the end)",
          shape="S")), _embedding,
       examples=(Example("rows used twice get twice the gradient",
                         {"weight": [[0.0, 0.0]] * 4, "ids": [1, 2, 1]}, "L3.2",
                         expected={"value": [[0.0, 0.0]] * 3,
                                   "grads": {"weight": [[0.0, 0.0], [2.0, 2.0], [1.0, 1.0],
                                                        [0.0, 0.0]]}}),)),
    Op("masked_fill", autograd.masked_fill, "where(mask, value, a): mask=true means replace"
       " (block); masked positions give a no gradient", "L3.4",
       (T("a"), C("mask", "bool_mask", "true = replace / block"),
        C("value", "number", "the fill value, e.g. \"-Infinity\"")),
       elementwise("a", "mask"),
       examples=(ex("causal mask", "L3.5", a=[[0.0] * 3] * 3,
                    mask=[[False, True, True], [False, False, True], [False, False, False]],
                    value="-Infinity"),)),
    # L4 distributions and activations
    Op("softmax", autograd.softmax, "exp(a - max) / sum along axis; stable for large logits",
       "L4.1", (T("a"), SOFTMAX_AXIS), _along_axis,
       examples=(ex("uniform over equal logits", a=[[1000.0, 1000.0], [0.0, 1.0]]),)),
    Op("log_softmax", autograd.log_softmax, "a - max - log(sum(exp(a - max))) along axis",
       "L4.1", (T("a"), SOFTMAX_AXIS), _along_axis,
       examples=(Example("large equal logits: log-probabilities -log 2, no overflow",
                         {"a": [[1000.0, 1000.0]]}, "L4.1",
                         expected={"value": [[-LOG2, -LOG2]]}),)),
    Op("softmax_np", autograd.softmax_np, "softmax of a plain array; returns an ndarray, no"
       " graph (L4.3)", "L4.3", (C("x", "array", "array-like"), SOFTMAX_AXIS), _along_axis,
       output="ndarray",
       examples=(Example("large equal logits, plain array: probabilities 1/2, no graph",
                         {"x": [[1000.0, 1000.0]]}, "L4.3",
                         expected={"value": [[0.5, 0.5]]}),)),
    Op("sigmoid", autograd.sigmoid, "1 / (1 + exp(-a)), without overflow at ±10 000", "L4.2",
       (T("a"),), same_as("a"),
       examples=(Example("finite extremes", {"a": [-10000.0, 0.0, 10000.0]}, "L4.2",
                         expected={"value": [0.0, 0.5, 1.0]}),)),
    Op("silu", autograd.silu, "a * sigmoid(a)", "L4.2", (T("a"),), same_as("a"),
       examples=(Example("slope 1/2 at zero", {"a": [0.0]}, "L4.2",
                         expected={"value": [0.0], "grads": {"a": [0.5]}}),)),
    # L5 cross-entropy
    Op("cross_entropy", autograd.cross_entropy, "mean of -log softmax(logits)[target]", "L5.1",
       (T("logits", "raw logits", "(N, V)"),
        C("targets", "int_array", "integer class ids", shape="(N,)")), _cross_entropy,
       examples=(Example("two equal logits: loss log 2, gradient (softmax - one-hot) / N",
                         {"logits": [[0.0, 0.0]], "targets": [1]}, "L5.1",
                         expected={"value": LOG2, "grads": {"logits": [[0.5, -0.5]]}}),)),
    Op("cross_entropy_grad", autograd.cross_entropy_grad, "(softmax(logits) - one_hot) / N as"
       " an ndarray; builds no graph", "L5.2",
       (C("logits", "array", "raw logits", shape="(N, V)"),
        C("targets", "int_array", "integer class ids", shape="(N,)")),
       _cross_entropy_grad, output="ndarray",
       examples=(Example("two equal logits, closed form: (softmax - one-hot) / N, no graph",
                         {"logits": [[0.0, 0.0]], "targets": [1]}, "L5.2",
                         expected={"value": [[0.5, -0.5]]}),)),
    # L6 RoPE and K/V repetition
    Op("rope", autograd.rope, "rotate each (even, odd) pair of the last axis by its angle:"
       " (x0 cos - x1 sin, x0 sin + x1 cos)", "L6.1",
       (T("x", "queries or keys", "(B, H, n, dk)"),
        C("cos", "table", "cos of the angles (rope_angles)", shape="(n, dk/2)"),
        C("sin", "table", "sin of the angles (rope_angles)", shape="(n, dk/2)")), _rope,
       examples=(Example("a quarter turn", {"x": [[1.0, 2.0, 3.0, 4.0]], "cos": [[0.0, 0.0]],
                                            "sin": [[1.0, 1.0]]}, "L6.1",
                         expected={"value": [[-2.0, 1.0, -4.0, 3.0]]}),)),
    Op("repeat_kv", autograd.repeat_kv, "repeat each K/V head `repeats` times (adjacent);"
       " the backward sums the repeats", "L6.3",
       (T("x", "keys or values", "(B, Hkv, n, dk)"),
        C("repeats", "int", "how many query heads share each K/V head (positive)")), _repeat_kv,
       examples=(Example("two heads, twice", {"x": [[[[1.0]], [[2.0]]]], "repeats": 2}, "L6.3",
                         expected={"value": [[[[1.0]], [[1.0]], [[2.0]], [[2.0]]]],
                                   "grads": {"x": [[[[2.0]], [[2.0]]]]}}),)),
]


# --------------------------------------------------------------------------------------
# L7 layer ops (glassllm.layers), each a composition of the ops above
# --------------------------------------------------------------------------------------

# Each layer plan first calls the library's own shape contract (`layers.*_shape`): a
# weight NumPy would broadcast, or a head count that does not divide d, is a ShapeError
# naming that input before any work, and the planned shape is the one the layer returns.

def _rms_norm(args: dict) -> Plan:
    return Plan(layers.rms_norm_shape(_shape(args, "x"), _shape(args, "weight")), ("x",))


def _linear(args: dict) -> Plan:
    x, w = _shape(args, "x"), _shape(args, "weight")
    layers.linear_shape(x, w)
    out, sizes, madds = _product(x, w, "x, weight")                        # (…, d_out)
    return Plan(out, ("x", "weight"), tuple(sizes), madds, "x, weight")


def _swiglu(args: dict) -> Plan:
    x, w1, w2, w3 = (_shape(args, name) for name in ("x", "w1", "w2", "w3"))
    layers.swiglu_shape(x, w1, w2, w3)
    hidden, s1, m1 = _product(x, w1, "x, w1")                             # gate: (…, F)
    _, s3, m3 = _product(x, w3, "x, w3")                                   # up: (…, F)
    out, s2, m2 = _product(hidden, w2, "x, w1, w2, w3")                   # (…, d)
    return Plan(out, ("x",), (*s1, *s3, ("x, w1, w3", math.prod(hidden)), *s2),
                m1 + m2 + m3, "x, w1, w2, w3")


def _heads(args: dict) -> tuple[int, int]:
    """H and Hkv; a count below 1 is a wrong value of an int input (422), like repeats."""
    h, hkv = args["n_heads"], args["n_kv_heads"]
    if h < 1 or hkv < 1:
        raise WireError("n_heads" if h < 1 else "n_kv_heads", "must be a positive integer")
    return h, hkv


def _attention_sizes(args: dict) -> tuple[tuple[int, ...], list, int]:
    """Attention's output shape, the arrays it builds and its multiply-adds (forward +
    backward): the q / k / v projections, the (B, H, n, dk) heads with K and V repeated
    to H heads, the (B, H, n, n) scores (masked, softmax'd), the output projection."""
    h, hkv = _heads(args)
    x = layers.attention_shape(*(_shape(args, name) for name in ("x", "wq", "wk", "wv", "wo")),
                               h, hkv, _shape(args, "cos"), _shape(args, "sin"))
    b, n, d = x
    dk = d // h
    sizes, madds = [], 0
    for w in ("wq", "wk", "wv"):
        _, s, m = _product(x, _shape(args, w), f"x, {w}")                 # (B, n, H·dk | Hkv·dk)
        sizes, madds = sizes + s, madds + m
    heads = (b, h, n, dk)                                                  # q, repeat_kv(k), …
    scores, s1, m1 = _product(heads, (b, h, dk, n), "x, n_heads")         # q·kᵀ: (B, H, n, n)
    _, s2, m2 = _product(scores, heads, "x, n_heads")                     # weights·v
    out, s3, m3 = _product((b, n, h * dk), _shape(args, "wo"), "x, wo")   # (B, n, d)
    return out, [*sizes, *s1, *s2, *s3], madds + m1 + m2 + m3


def _attention(args: dict) -> Plan:
    out, sizes, madds = _attention_sizes(args)
    return Plan(out, ("x",), tuple(sizes), madds, "x, wq, wk, wv, wo")


def _block(args: dict) -> Plan:
    layers.transformer_block_shape(
        *(_shape(args, name) for name in ("x", "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                                          "w1", "w2", "w3")),
        *_heads(args), _shape(args, "cos"), _shape(args, "sin"))
    out, sizes, madds = _attention_sizes(args)                            # rms_norm, + : (B, n, d)
    ffn = _swiglu({"x": probe(out), "w1": args["w1"], "w2": args["w2"], "w3": args["w3"]})
    return Plan(out, ("x",), (*sizes, *ffn.sizes), madds + ffn.madds,
                "x, wq, wk, wv, wo, w1, w2, w3")


_W = "a weight matrix"
_HEADS = (C("n_heads", "int", "query heads H"), C("n_kv_heads", "int", "K/V heads Hkv"))
_TABLES = (C("cos", "table", "rope_angles(n, dk)[0]", shape="(n, dk/2)"),
           C("sin", "table", "rope_angles(n, dk)[1]", shape="(n, dk/2)"))
_ATTN_W = (T("wq", _W, "(d, H·dk)"), T("wk", _W, "(d, Hkv·dk)"), T("wv", _W, "(d, Hkv·dk)"),
           T("wo", _W, "(H·dk, d)"))
_FFN_W = (T("w1", "gate projection", "(d, F)"), T("w2", "down projection", "(F, d)"),
          T("w3", "up projection", "(d, F)"))
_I2 = [[1.0, 0.0], [0.0, 1.0]]
_X = [[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]                           # (B=1, n=3, d=2)
_COS, _SIN = (t.tolist() for t in layers.rope_angles(3, 2))
_ops += [
    Op("rms_norm", layers.rms_norm, "x / sqrt(mean(x², last axis) + eps) · weight", "L7",
       (T("x", "activations", "(…, d)"), T("weight", "per-feature gain", "(d,)"),
        C("eps", "number", "added under the root", default=1e-6)),
       _rms_norm, module="glassllm.layers",
       examples=(ex("a 3-4-5 row", x=[[3.0, 4.0]], weight=[1.0, 2.0], eps=0.0),)),
    Op("linear", layers.linear, "x @ weight, weight stored (d_in, d_out)", "L7",
       (T("x", "activations", "(…, d_in)"), T("weight", _W, "(d_in, d_out)")), _linear,
       module="glassllm.layers",
       examples=(ex("2 → 3", x=[[1.0, 2.0]], weight=[[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]),)),
    Op("swiglu", layers.swiglu, "(silu(x @ w1) · (x @ w3)) @ w2", "L7",
       (T("x", "activations", "(…, d)"), *_FFN_W), _swiglu, module="glassllm.layers",
       examples=(ex("identity weights", x=[[0.0, 2.0]], w1=_I2, w2=_I2, w3=_I2),)),
    Op("attention", layers.attention, "causal grouped-query self-attention with RoPE",
       "L7", (T("x", "activations", "(B, n, d)"), *_ATTN_W, *_HEADS, *_TABLES),
       _attention, module="glassllm.layers",
       examples=(ex("one head, identity weights", x=_X, wq=_I2, wk=_I2, wv=_I2, wo=_I2,
                    n_heads=1, n_kv_heads=1, cos=_COS, sin=_SIN),)),
    Op("transformer_block", layers.transformer_block, "x + attention(rms_norm(x)), then"
       " h + swiglu(rms_norm(h)): the residual stream", "L7",
       (T("x", "activations", "(B, n, d)"), T("attn_norm", "gain", "(d,)"), *_ATTN_W,
        T("ffn_norm", "gain", "(d,)"), *_FFN_W, *_HEADS, *_TABLES,
        C("eps", "number", "RMSNorm epsilon", default=1e-6)), _block,
       module="glassllm.layers",
       examples=(ex("one head, identity weights", x=_X, attn_norm=[1.0, 1.0], wq=_I2,
                    wk=_I2, wv=_I2, wo=_I2, ffn_norm=[1.0, 1.0], w1=_I2, w2=_I2, w3=_I2,
                    n_heads=1, n_kv_heads=1, cos=_COS, sin=_SIN),)),
]

OPS: dict[str, Op] = {op.name: op for op in _ops}


def get(name: str) -> Op | None:
    """The op called `name`, or None. Names are only ever looked up in this dict."""
    return OPS.get(name) if isinstance(name, str) else None


# --------------------------------------------------------------------------------------
# running an op: coerce → plan → check limits → forward → backward
# --------------------------------------------------------------------------------------

def coerce_inputs(op: Op, inputs: Mapping[str, Any], *, maybe_bools: bool = True,
                  max_array_elements: int | None = None) -> dict[str, Any]:
    """Wire values → Python / NumPy values, one input at a time (WireError names the input)."""
    unknown = sorted(set(inputs) - {i.name for i in op.inputs})
    if unknown:
        raise WireError(unknown[0], f"is not an input of {op.name}; its inputs are "
                                    + ", ".join(i.name for i in op.inputs))
    args: dict[str, Any] = {}
    for spec in op.inputs:
        if spec.name not in inputs:
            if spec.required:
                raise WireError(spec.name, f"is required by {op.name}")
            args[spec.name] = spec.default
            continue
        value = coerce(spec.kind, spec.name, inputs[spec.name], maybe_bools=maybe_bools,
                       max_elements=max_array_elements)
        if (max_array_elements is not None and spec.kind in ARRAY_KINDS
                and np.size(value) > max_array_elements):
            raise LimitError(spec.name, f"has {np.size(value)} elements; the limit is"
                                        f" {max_array_elements}")
        args[spec.name] = value
    return args


def plan(op: Op, args: dict) -> Plan:
    """The op's shape plan: NumPy's shape / axis / index errors surface here, before work."""
    return op.plan(args)


def check_limits(p: Plan, *, max_result_elements: int, max_matmul_madds: int) -> None:
    for names, n in ((", ".join(p.blame), p.size), *p.sizes):
        if n > max_result_elements:
            raise LimitError(names, f"would produce {n} elements; the limit is"
                                    f" {max_result_elements} (SPEC H5)")
    if p.madds > max_matmul_madds:
        raise LimitError(p.madds_blame, f"matmul would take {p.madds} multiply-adds; the limit"
                                        f" is {max_matmul_madds} (SPEC H5)")


def check_requires_grad(op: Op, requires_grad: Sequence[str] | None) -> tuple[str, ...]:
    if requires_grad is None:
        return op.differentiable
    names = {i.name for i in op.inputs}
    for name in requires_grad:
        if name not in names:
            raise WireError("requires_grad", f"names '{name}', which is not an input of {op.name}")
        if name not in op.differentiable:
            raise WireError("requires_grad", f"names '{name}', which is not differentiable: {L06}")
    return tuple(dict.fromkeys(requires_grad))


def check_grad_output_has_a_backward(op: Op, wanted: Sequence[str], grad_output: Any) -> None:
    """A seed with nothing to seed is refused, not silently dropped (H2, 422)."""
    if grad_output is None:
        return
    if op.output == "ndarray":
        raise WireError("grad_output", f"{op.name} returns an ndarray (L0.2): there is no"
                                       " backward to seed")
    if not wanted:
        raise WireError("grad_output", "no input requires grad (requires_grad is empty), so"
                                       " there is no backward to seed")


def run(op: Op, args: dict, requires_grad: Sequence[str] | None = None,
        grad_output: np.ndarray | None = None) -> OpResult:
    """Forward, then backward from `grad_output` (default ones: the gradient of the sum, H2).

    `args` are coerced values (`coerce_inputs`). Tensors are made here, one per tensor
    input, so each call owns its graph (H6).
    """
    wanted = check_requires_grad(op, requires_grad)
    check_grad_output_has_a_backward(op, wanted, grad_output)
    call = []
    for spec in op.inputs:
        value = args[spec.name]
        if spec.kind == "tensor":
            value = Tensor(value, requires_grad=spec.name in wanted)
        call.append(value)
    if not wanted:
        with no_grad():
            out = op.fn(*call)
        return OpResult(_data(out), {})
    out = op.fn(*call)
    value = _data(out)
    if grad_output is None:
        grad_output = np.ones_like(value)
    elif np.shape(grad_output) != value.shape:
        raise WireError("grad_output", f"has shape {np.shape(grad_output)} but the output of"
                                       f" {op.name} has shape {value.shape}")
    out.backward(np.asarray(grad_output, dtype=np.float64))
    grads = {}
    for spec, tensor in zip(op.inputs, call, strict=True):
        if spec.name in wanted:
            grad = tensor.grad                       # None: the output does not depend on it
            grads[spec.name] = grad if grad is not None else np.zeros_like(tensor.data)
    return OpResult(value, grads)


@functools.cache
def example_answer(name: str, index: int) -> dict:
    """``expected`` of the op's example `index`, complete (issue 12): the numbers the example
    states (the reference's, SPEC Part L) and, for what it leaves out, the library's own
    value and gradients, computed once. Wire format; a test checks every gradient against
    central differences."""
    op = OPS[name]
    example = op.examples[index]
    grad_output = None if example.grad_output is None else \
        coerce("tensor", "grad_output", example.grad_output)
    result = run(op, coerce_inputs(op, example.inputs), example.requires_grad, grad_output)
    computed: dict = {"value": encode_array(result.value)}
    if op.output == "tensor":
        computed["grads"] = {k: encode_array(g) for k, g in result.grads.items()}
    stated = example.expected
    out = {**computed, **stated}
    if "grads" in computed:
        out["grads"] = {**computed["grads"], **stated.get("grads", {})}
    return out


def _data(out: Any) -> np.ndarray:
    return np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)

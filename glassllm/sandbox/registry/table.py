"""The op table (SPEC H1): every op of `glassllm.autograd` and `glassllm.layers` described
once, as data — the single source for the service's dispatch and validation, its OpenAPI
schema, the page's op list and the expression evaluator.

Each `Op` holds its function, a summary, the clause it implements, its inputs (name, kind,
differentiable or not, default, shape in glossary letters), its output (kind and role),
its shape plan (`glassllm.sandbox.registry.plans`) and runnable examples in the wire format of
`glassllm.sandbox.wire`. Shape letters: see STYLE.md's glossary.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from glassllm import autograd, layers
from glassllm.sandbox.registry.entry import REQUIRED, Example, Input, Op
from glassllm.sandbox.registry.plans import PLANS, elementwise, same_as
from glassllm.sandbox.registry.vjp import vjp_of

__all__ = ["OPS", "get"]

# --------------------------------------------------------------------------------------
# the ops, in SPEC order (L1 … L7)
# --------------------------------------------------------------------------------------

def tensor(name: str, doc: str = "a tensor", shape: str | None = None) -> Input:
    """A differentiable tensor input."""
    return Input(name, "tensor", doc, differentiable=True, shape=shape)


def constant(name: str, kind: str, doc: str, default: Any = REQUIRED,
             shape: str | None = None) -> Input:
    """A constant (non-differentiable) input."""
    return Input(name, kind, doc, default=default, shape=shape)


def example(title: str, clause: str | None = None, **inputs: Any) -> Example:
    return Example(title, inputs, clause)


AXIS = constant("axis", "axis", "axis or axes to reduce; null reduces all", default=None)
KEEPDIMS = constant("keepdims", "bool", "keep reduced axes with size 1", default=False)
SOFTMAX_AXIS = constant("axis", "int", "the axis that sums to 1", default=-1)
LOG2 = math.log(2.0)
# Why the gradient of the output's sum (the default seed, ones) is zero for every input:
# the sum cannot change however the inputs move. The page says it in one sentence.
ROWS_SUM_TO_1 = "each softmax row sums to 1 whatever its inputs"

# name: (summary, how a formula writes it: the page's graph labels nodes so, `× 0.5`)
_BINARY = {"add": ("a + b", "+"), "sub": ("a - b", "−"), "mul": ("a * b (elementwise)", "×"),
           "div": ("a / b", "÷")}
_UNARY = {"neg": ("-a", [1.0, -2.0]), "exp": ("e**a (no clipping, L1.2)", [0.0, 1.0]),
          "log": ("natural log; log(0) = -inf with a warning (L1.2)", [1.0, 2.718281828459045]),
          "sqrt": ("square root; sqrt(<0) = NaN with a warning, sqrt'(0) = inf (L1.2)",
                   [0.25, 4.0])}

_ops: list[Op] = []
for _name, (_math, _symbol) in _BINARY.items():
    _ops.append(Op(_name, getattr(autograd, _name), f"{_math}, with NumPy broadcasting", "L1.1",
                   (tensor("a"), tensor("b")), elementwise("a", "b"), symbol=_symbol,
                   examples=(example(f"{_name} with broadcasting", a=[[1.0, 2.0], [3.0, 4.0]],
                                b=[10.0, 20.0]),)))
for _name, (_math, _x) in _UNARY.items():
    _ops.append(Op(_name, getattr(autograd, _name), _math, "L1.1", (tensor("a"),), same_as("a"),
                   symbol="−" if _name == "neg" else None, examples=(example(_name, a=_x),)))

_ops += [
    Op("pow", autograd.pow, "a ** exponent; the exponent is a constant (L0.6)", "L1.1",
       (tensor("a"), constant("exponent", "array", "constant exponent, a number or array")),
       elementwise("a", "exponent"), symbol="**",
       examples=(example("square", a=[1.0, 2.0, 3.0], exponent=2),)),
    Op("rpow", autograd._rpow, "base ** exponent with a constant base, e.g. 2 ** t (the"
       " reflected power, L1.1); the base is a constant (L0.6)", "L1.1",
       (constant("base", "array", "constant base, a number or array"), tensor("exponent")),
       elementwise("base", "exponent"), symbol="**",
       examples=(example("powers of two", base=2.0, exponent=[0.0, 1.0, 3.0]),)),
    Op("matmul", autograd.matmul, "a @ b, as np.matmul (1-D operands, batched broadcasting)",
       "L1.1", (tensor("a", shape="(…, n, k)"), tensor("b", shape="(…, k, m)")), PLANS["matmul"],
       symbol="@", examples=(example("2×2 @ 2×1", a=[[1.0, 2.0], [3.0, 4.0]], b=[[1.0], [1.0]]),)),
    # L2 reductions, shape and selection
    Op("tsum", autograd.tsum, "sum over axis (all axes when null)", "L2.1",
       (tensor("a"), AXIS, KEEPDIMS), PLANS["tsum"], symbol="Σ",
       examples=(example("column sums", a=[[1.0, 2.0], [3.0, 4.0]], axis=0),)),
    Op("mean", autograd.mean, "mean over axis (all axes when null)", "L2.1",
       (tensor("a"), AXIS, KEEPDIMS), PLANS["tsum"],
       examples=(example("row means", a=[[1.0, 2.0], [3.0, 5.0]], axis=1, keepdims=True),)),
    Op("max", autograd.max, "max over axis; ties split the gradient equally (L2.5)", "L2.1",
       (tensor("a"), AXIS, KEEPDIMS), PLANS["tsum"],
       examples=(example("a tie splits the gradient", "L2.5", a=[1.0, 3.0, 3.0]),)),
    Op("reshape", autograd.reshape, "the same elements in a new shape (-1 inferred once)",
       "L2.2", (tensor("a"), constant("shape", "shape", "the new shape")), PLANS["reshape"],
       examples=(example("2×3 → 3×2", a=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], shape=[3, -1]),)),
    Op("transpose", autograd.transpose, "permute axes (reverse them when null)", "L2.2",
       (tensor("a"), constant("axes", "axes", "the permutation", default=None)), PLANS["transpose"],
       symbol="ᵀ", examples=(example("matrix transpose", a=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),)),
    Op("getitem", autograd.getitem, "a[index], NumPy basic and advanced indexing; the backward"
       " scatter-adds into repeated positions", "L2.2",
       (tensor("a"),
        constant("index", "index", 'a NumPy index as JSON: an item or a list of items — int,'
                  ' null (new axis), "...", {"start","stop","step"}, {"array": ints},'
                  ' {"mask": bools}')), PLANS["getitem"],
       examples=(example("repeated rows scatter-add", a=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
                    index=[{"array": [0, 0, 2]}]),
                 example("a slice and a column", a=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
                    index=[{"start": 1}, 0]))),
    Op("where", autograd.where, "condition ? a : b elementwise; condition is a boolean mask",
       "L2.2",
       (constant("condition", "bool_mask", "boolean mask (L2.3)"), tensor("a"), tensor("b")),
       elementwise("condition", "a", "b"),
       examples=(example("pick by mask", condition=[True, False, True], a=[1.0, 2.0, 3.0],
                    b=[10.0, 20.0, 30.0]),)),
    # L3 embedding and mask
    Op("embedding", autograd.embedding, "rows of weight selected by integer ids, no one-hot;"
       " the backward scatter-adds (L3.2)", "L3.1",
       (tensor("weight", "the embedding table", "(V, d)"),
        constant("ids", "int_array",
                 "integer row ids, any shape S (negative ids index from the end)",
          shape="S")), PLANS["embedding"],
       examples=(Example("rows used twice get twice the gradient",
                         {"weight": [[0.0, 0.0]] * 4, "ids": [1, 2, 1]}, "L3.2",
                         expected={"value": [[0.0, 0.0]] * 3,
                                   "grads": {"weight": [[0.0, 0.0], [2.0, 2.0], [1.0, 1.0],
                                                        [0.0, 0.0]]}}),)),
    Op("masked_fill", autograd.masked_fill, "where(mask, value, a): mask=true means replace"
       " (block); masked positions give a no gradient", "L3.4",
       (tensor("a"), constant("mask", "bool_mask", "true = replace / block"),
        constant("value", "number", "the fill value, e.g. \"-Infinity\"")),
       elementwise("a", "mask"),
       examples=(example("causal mask", "L3.5", a=[[0.0] * 3] * 3,
                    mask=[[False, True, True], [False, False, True], [False, False, False]],
                    value="-Infinity"),)),
    # L4 distributions and activations
    Op("softmax", autograd.softmax, "exp(a - max) / sum along axis; stable for large logits",
       "L4.1", (tensor("a"), SOFTMAX_AXIS), PLANS["softmax"], sum_invariant=ROWS_SUM_TO_1,
       stands_for=("softmax_np",),             # its forward is softmax_np's numbers
       examples=(example("uniform over equal logits", a=[[1000.0, 1000.0], [0.0, 1.0]]),)),
    Op("log_softmax", autograd.log_softmax, "a - max - log(sum(exp(a - max))) along axis",
       "L4.1", (tensor("a"), SOFTMAX_AXIS), PLANS["softmax"],
       stands_for=("softmax",),                # its backward multiplies by exp(out) = softmax
       examples=(Example("large equal logits: log-probabilities -log 2, no overflow",
                         {"a": [[1000.0, 1000.0]]}, "L4.1",
                         expected={"value": [[-LOG2, -LOG2]]}),)),
    Op("softmax_np", autograd.softmax_np, "softmax of a plain array; returns an ndarray, no"
       " graph (L4.3)", "L4.3", (constant("x", "array", "array-like"), SOFTMAX_AXIS),
       PLANS["softmax"], sum_invariant=ROWS_SUM_TO_1,
       output="ndarray", stands_for=("softmax",),
       examples=(Example("large equal logits, plain array: probabilities 1/2, no graph",
                         {"x": [[1000.0, 1000.0]]}, "L4.3",
                         expected={"value": [[0.5, 0.5]]}),)),
    Op("sigmoid", autograd.sigmoid, "1 / (1 + exp(-a)), without overflow at ±10 000", "L4.2",
       (tensor("a"),), same_as("a"),
       examples=(Example("finite extremes", {"a": [-10000.0, 0.0, 10000.0]}, "L4.2",
                         expected={"value": [0.0, 0.5, 1.0]}),)),
    Op("silu", autograd.silu, "a * sigmoid(a)", "L4.2", (tensor("a"),), same_as("a"),
       stands_for=("sigmoid",),                # out / a is sigmoid(a); its backward uses it
       examples=(Example("slope 1/2 at zero", {"a": [0.0]}, "L4.2",
                         expected={"value": [0.0], "grads": {"a": [0.5]}}),)),
    Op("relu", autograd.relu, "max(a, 0); the gradient at 0 is 0, as in PyTorch", "L4.2",
       (tensor("a"),), same_as("a"),
       # away from the kink at 0, where finite differences see 1/2 and the backward says 0
       # (PyTorch's choice; tests/library/test_activations_reference.py checks it)
       examples=(Example("negative inputs get no gradient", {"a": [-1.0, 0.5, 2.0]}, "L4.2",
                         expected={"value": [0.0, 0.5, 2.0], "grads": {"a": [0.0, 1.0, 1.0]}}),)),
    Op("tanh", autograd.tanh, "hyperbolic tangent, exactly ±1 at finite extremes", "L4.2",
       (tensor("a"),), same_as("a"),
       examples=(Example("slope 1 at zero, flat at the extremes", {"a": [-1000.0, 0.0, 1000.0]},
                         "L4.2", expected={"value": [-1.0, 0.0, 1.0],
                                           "grads": {"a": [0.0, 1.0, 0.0]}}),)),
    Op("gelu", autograd.gelu, "a · Φ(a), Φ the normal cdf through erf (PyTorch's gelu,"
       " approximate='none')", "L4.2", (tensor("a"),), same_as("a"),
       examples=(Example("slope 1/2 at zero", {"a": [0.0]}, "L4.2",
                         expected={"value": [0.0], "grads": {"a": [0.5]}}),)),
    Op("gelu_tanh", autograd.gelu_tanh, "½a(1 + tanh(√(2/π)(a + 0.044715a³))) (PyTorch's gelu,"
       " approximate='tanh')", "L4.2", (tensor("a"),), same_as("a"),
       examples=(Example("slope 1/2 at zero", {"a": [0.0]}, "L4.2",
                         expected={"value": [0.0], "grads": {"a": [0.5]}}),)),
    # L5 cross-entropy
    Op("cross_entropy", autograd.cross_entropy, "mean of -log softmax(logits)[target]", "L5.1",
       (tensor("logits", "raw logits", "(N, V)"),
        constant("targets", "int_array", "integer class ids", shape="(N,)")),
       PLANS["cross_entropy"], role="loss",
       stands_for=("log_softmax", "cross_entropy_grad"),   # its loss and its gradient
       examples=(Example("two equal logits: loss log 2, gradient (softmax - one-hot) / N",
                         {"logits": [[0.0, 0.0]], "targets": [1]}, "L5.1",
                         expected={"value": LOG2, "grads": {"logits": [[0.5, -0.5]]}}),)),
    Op("cross_entropy_grad", autograd.cross_entropy_grad, "(softmax(logits) - one_hot) / N as"
       " an ndarray; builds no graph", "L5.2",
       (constant("logits", "array", "raw logits", shape="(N, V)"),
        constant("targets", "int_array", "integer class ids", shape="(N,)")),
       PLANS["cross_entropy_grad"], output="ndarray",
       stands_for=("cross_entropy", "softmax"),  # cross_entropy's gradient, softmax - one-hot
       examples=(Example("two equal logits, closed form: (softmax - one-hot) / N, no graph",
                         {"logits": [[0.0, 0.0]], "targets": [1]}, "L5.2",
                         expected={"value": [[0.5, -0.5]]}),)),
    # L6 RoPE and K/V repetition
    Op("rope", autograd.rope, "rotate each (even, odd) pair of the last axis by its angle:"
       " (x0 cos - x1 sin, x0 sin + x1 cos)", "L6.1",
       (tensor("x", "queries or keys", "(B, H, n, dk)"),
        constant("cos", "table", "cos of the angles (rope_angles)", shape="(n, dk/2)"),
        constant("sin", "table", "sin of the angles (rope_angles)", shape="(n, dk/2)")),
       PLANS["rope"],
       examples=(Example("a quarter turn", {"x": [[1.0, 2.0, 3.0, 4.0]], "cos": [[0.0, 0.0]],
                                            "sin": [[1.0, 1.0]]}, "L6.1",
                         expected={"value": [[-2.0, 1.0, -4.0, 3.0]]}),)),
    Op("repeat_kv", autograd.repeat_kv, "repeat each K/V head `repeats` times (adjacent);"
       " the backward sums the repeats", "L6.3",
       (tensor("x", "keys or values", "(B, Hkv, n, dk)"),
        constant("repeats", "int", "how many query heads share each K/V head (positive)")),
       PLANS["repeat_kv"],
       examples=(Example("two heads, twice", {"x": [[[[1.0]], [[2.0]]]], "repeats": 2}, "L6.3",
                         expected={"value": [[[[1.0]], [[1.0]], [[2.0]], [[2.0]]]],
                                   "grads": {"x": [[[[2.0]], [[2.0]]]]}}),)),
]


_W = "a weight matrix"
_HEADS = (constant("n_heads", "int", "query heads H"),
          constant("n_kv_heads", "int", "K/V heads Hkv"))
_TABLES = (constant("cos", "table", "rope_angles(n, dk)[0]", shape="(n, dk/2)"),
           constant("sin", "table", "rope_angles(n, dk)[1]", shape="(n, dk/2)"))
_ATTN_W = (tensor("wq", _W, "(d, H·dk)"), tensor("wk", _W, "(d, Hkv·dk)"),
           tensor("wv", _W, "(d, Hkv·dk)"),
           tensor("wo", _W, "(H·dk, d)"))
_FFN_W = (tensor("w1", "gate projection", "(d, F)"), tensor("w2", "down projection", "(F, d)"),
          tensor("w3", "up projection", "(d, F)"))
_I2 = [[1.0, 0.0], [0.0, 1.0]]
_X = [[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]                           # (B=1, n=3, d=2)
_COS, _SIN = (t.tolist() for t in layers.rope_angles(3, 2))
_ops += [
    Op("rms_norm", layers.rms_norm, "x / sqrt(mean(x², last axis) + eps) · weight", "L7",
       (tensor("x", "activations", "(…, d)"), tensor("weight", "per-feature gain", "(d,)"),
        constant("eps", "number", "added under the root", default=1e-6)),
       PLANS["rms_norm"], module="glassllm.layers",
       examples=(example("a 3-4-5 row", x=[[3.0, 4.0]], weight=[1.0, 2.0], eps=0.0),)),
    Op("linear", layers.linear, "x @ weight, weight stored (d_in, d_out)", "L7",
       (tensor("x", "activations", "(…, d_in)"), tensor("weight", _W, "(d_in, d_out)")),
       PLANS["linear"],
       module="glassllm.layers",
       examples=(example("2 → 3", x=[[1.0, 2.0]], weight=[[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]),)),
    Op("swiglu", layers.swiglu, "(silu(x @ w1) · (x @ w3)) @ w2", "L7",
       (tensor("x", "activations", "(…, d)"), *_FFN_W), PLANS["swiglu"], module="glassllm.layers",
       examples=(example("identity weights", x=[[0.0, 2.0]], w1=_I2, w2=_I2, w3=_I2),)),
    Op("attention", layers.attention, "causal grouped-query self-attention with RoPE",
       "L7", (tensor("x", "activations", "(B, n, d)"), *_ATTN_W, *_HEADS, *_TABLES),
       PLANS["attention"], module="glassllm.layers",
       examples=(example("one head, identity weights", x=_X, wq=_I2, wk=_I2, wv=_I2, wo=_I2,
                    n_heads=1, n_kv_heads=1, cos=_COS, sin=_SIN),)),
    Op("transformer_block", layers.transformer_block, "x + attention(rms_norm(x)), then"
       " h + swiglu(rms_norm(h)): the residual stream", "L7",
       (tensor("x", "activations", "(B, n, d)"), tensor("attn_norm", "gain", "(d,)"), *_ATTN_W,
        tensor("ffn_norm", "gain", "(d,)"), *_FFN_W, *_HEADS, *_TABLES,
        constant("eps", "number", "RMSNorm epsilon", default=1e-6)), PLANS["transformer_block"],
       module="glassllm.layers",
       examples=(example("one head, identity weights", x=_X, attn_norm=[1.0, 1.0], wq=_I2,
                    wk=_I2, wv=_I2, wo=_I2, ffn_norm=[1.0, 1.0], w1=_I2, w2=_I2, w3=_I2,
                    n_heads=1, n_kv_heads=1, cos=_COS, sin=_SIN),)),
]


# each op's backward rule, read from its docstring's Backward: block (glassllm.sandbox.registry.vjp)
OPS: dict[str, Op] = {op.name: replace(op, vjp=vjp_of(op.name, op.fn, op.differentiable))
                      for op in _ops}


def get(name: str) -> Op | None:
    """The op called `name`, or None. Names are only ever looked up in this dict."""
    return OPS.get(name) if isinstance(name, str) else None

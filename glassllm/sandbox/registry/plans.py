"""Shape plans (SPEC H5): from the input shapes and values alone, each op's output shape,
the size of every large intermediate (forward and backward: each matmul's output and
gradients, attention's (B, H, n, n) scores, SwiGLU's F-wide hidden), the matmul
multiply-adds of forward + backward, and the axes each input's gradient is summed over —
before any compute, so a broadcast, `repeat_kv`, index or layer that would explode is
refused up front.

Each plan calls its op's own shape rule (`glassllm.shapes`: the layers' too, ``*_shape``),
the rule the op itself calls: a shape is checked in one place. A plan costs time
proportional to its inputs, never to its result (`glassllm.shapes` says how).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from glassllm.sandbox.registry.entry import Plan
from glassllm.shapes import (
    attention_shape,
    broadcast_rule,
    cross_entropy_rule,
    embedding_weight_rule,
    index_shape,
    linear_shape,
    matmul_cost,
    matmul_rule,
    probe,
    reduce_shape,
    repeat_kv_rule,
    rms_norm_shape,
    rope_rule,
    swiglu_shape,
    transformer_block_shape,
    zero_d_axis,
)

__all__ = ["PLANS", "elementwise", "same_as"]


def _shape(args: Mapping, name: str) -> tuple[int, ...]:
    return np.shape(args[name])


def elementwise(*names: str) -> Callable[[dict], Plan]:
    """Output = the broadcast of the named inputs (L0.4); each is summed back (L0.5)."""
    def plan_(args: dict) -> Plan:
        rule = broadcast_rule({n: _shape(args, n) for n in names}, names)
        return Plan(rule.shape, names, summed=rule.summed)
    return plan_


def same_as(name: str, *also: str) -> Callable[[dict], Plan]:
    """Output = the named input's shape. Of one input (an elementwise op of one tensor),
    nothing can be refused for its shape: ``may_refuse`` is False (the HTTP service then
    documents no 400 for the op)."""
    def plan_(args: dict) -> Plan:
        return Plan(_shape(args, name), (name, *also))
    plan_.may_refuse = bool(also)  # type: ignore[attr-defined]
    return plan_


def _reduce(args: dict) -> Plan:
    """The reduced shape; the backward spreads the output's gradient over the whole input:
    an intermediate of the input's size (a sum of 10⁶ elements to one number builds 10⁶)."""
    a = _shape(args, "a")
    return Plan(reduce_shape(a, args.get("axis"), args.get("keepdims", False)), ("a",),
                (("a", math.prod(a)),))


def _along_axis(args: dict) -> Plan:
    name = "a" if "a" in args else "x"
    shape = _shape(args, name)
    if shape or not zero_d_axis(args.get("axis", -1)):  # a 0-d input takes axis 0 / -1
        normalize_axis_index(args.get("axis", -1), len(shape))
    return Plan(shape, (name,))


def _product(sa: tuple[int, ...], sb: tuple[int, ...], names: str
             ) -> tuple[tuple[int, ...], list[tuple[str, int]], int]:
    """One matmul inside a plan: its output shape, the arrays it and its backward build
    (output, both gradients), named by `names`, and its multiply-adds (forward + backward)."""
    out, sizes, madds = matmul_cost(sa, sb)
    return out, [(names, n) for n in sizes], madds


def _matmul_plan(a: str, b: str) -> Callable[[dict], Plan]:
    """a @ b (matmul; linear is x @ weight), summed axes from matmul's rule."""
    def plan_(args: dict) -> Plan:
        sa, sb = _shape(args, a), _shape(args, b)
        out, sizes, madds = _product(sa, sb, f"{a}, {b}")
        rule = matmul_rule(sa, sb)
        return Plan(out, (a, b), tuple(sizes), madds, f"{a}, {b}",
                    {a: rule.summed["a"], b: rule.summed["b"]})
    return plan_


def _reshape(args: dict) -> Plan:
    return Plan(probe(_shape(args, "a")).reshape(args["shape"]).shape, ("a",))


def _transpose(args: dict) -> Plan:
    return Plan(probe(_shape(args, "a")).transpose(args.get("axes")).shape, ("a",))


def _getitem(args: dict) -> Plan:
    # from the index arrays' shapes, not by indexing a probe: that walks every result
    # position. The backward scatters into zeros shaped like a: one element picked from a
    # large a builds a's size.
    a = _shape(args, "a")
    return Plan(index_shape(a, args["index"]), ("a", "index"), (("a", math.prod(a)),))


def _embedding(args: dict) -> Plan:
    weight = _shape(args, "weight")
    embedding_weight_rule(weight)
    # S + (d,); the backward scatter-adds into zeros shaped like the whole table
    return Plan(index_shape(weight, args["ids"]), ("weight", "ids"),
                (("weight", math.prod(weight)),))


def _cross_entropy(args: dict) -> Plan:
    logits = _shape(args, "logits")
    rule = cross_entropy_rule(logits, args["targets"])
    return Plan(rule.shape, ("logits",), (("logits", math.prod(logits)),))


def _cross_entropy_grad(args: dict) -> Plan:
    cross_entropy_rule(_shape(args, "logits"), args["targets"])
    return Plan(_shape(args, "logits"), ("logits", "targets"))


def _rope(args: dict) -> Plan:
    return Plan(rope_rule(*(_shape(args, n) for n in ("x", "cos", "sin"))).shape,
                ("x", "cos", "sin"))


def _repeat_kv(args: dict) -> Plan:
    return Plan(repeat_kv_rule(_shape(args, "x"), args["repeats"]).shape, ("x", "repeats"))


# --------------------------------------------------------------------------------------
# L7 layers: each plan first calls the layer's own shape contract (`*_shape`): a
# weight NumPy would broadcast, or a head count that does not divide d, is a ShapeError
# naming that input before any work, and the planned shape is the one the layer returns.
# --------------------------------------------------------------------------------------

def _rms_norm(args: dict) -> Plan:
    x, weight = _shape(args, "x"), _shape(args, "weight")
    out = rms_norm_shape(x, weight)
    return Plan(out, ("x",), summed=broadcast_rule({"x": x, "weight": weight},
                                                  ("x", "weight")).summed)


def _linear(args: dict) -> Plan:
    linear_shape(_shape(args, "x"), _shape(args, "weight"))
    return _matmul_plan("x", "weight")(args)                              # (…, d_out)


def _swiglu(args: dict) -> Plan:
    x, w1, w2, w3 = (_shape(args, name) for name in ("x", "w1", "w2", "w3"))
    swiglu_shape(x, w1, w2, w3)
    hidden, s1, m1 = _product(x, w1, "x, w1")                             # gate: (…, F)
    _, s3, m3 = _product(x, w3, "x, w3")                                   # up: (…, F)
    out, s2, m2 = _product(hidden, w2, "x, w1, w2, w3")                   # (…, d)
    return Plan(out, ("x",), (*s1, *s3, ("x, w1, w3", math.prod(hidden)), *s2),
                m1 + m2 + m3, "x, w1, w2, w3")


def _attention_sizes(args: dict) -> tuple[tuple[int, ...], list, int]:
    """Attention's output shape, the arrays it builds and its multiply-adds (forward +
    backward): the q / k / v projections, the (B, H, n, dk) heads with K and V repeated
    to H heads, the (B, H, n, n) scores (masked, softmax'd), the output projection."""
    h, hkv = args["n_heads"], args["n_kv_heads"]
    x = attention_shape(*(_shape(args, name) for name in ("x", "wq", "wk", "wv", "wo")),
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
    transformer_block_shape(
        *(_shape(args, name) for name in ("x", "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                                          "w1", "w2", "w3")),
        args["n_heads"], args["n_kv_heads"], _shape(args, "cos"), _shape(args, "sin"))
    out, sizes, madds = _attention_sizes(args)                            # rms_norm, + : (B, n, d)
    ffn = _swiglu({"x": probe(out), "w1": args["w1"], "w2": args["w2"], "w3": args["w3"]})
    return Plan(out, ("x",), (*sizes, *ffn.sizes), madds + ffn.madds,
                "x, wq, wk, wv, wo, w1, w2, w3")


# The plan of every op that is not elementwise (those are built by `elementwise`).
PLANS: dict[str, Callable[[dict], Plan]] = {
    "matmul": _matmul_plan("a", "b"), "tsum": _reduce, "mean": _reduce, "max": _reduce,
    "reshape": _reshape, "transpose": _transpose, "getitem": _getitem,
    "embedding": _embedding, "softmax": _along_axis, "log_softmax": _along_axis,
    "softmax_np": _along_axis, "cross_entropy": _cross_entropy,
    "cross_entropy_grad": _cross_entropy_grad, "rope": _rope, "repeat_kv": _repeat_kv,
    "rms_norm": _rms_norm, "linear": _linear, "swiglu": _swiglu, "attention": _attention,
    "transformer_block": _block}

"""Shape plans (SPEC H5): every intermediate and multiply-add a request will cost is known
from shapes before any work, and knowing it costs time proportional to the inputs only.

Layer ops (L7) are counted through their inside: each matmul's output and the gradients
its backward builds, attention's (B, H, n, n) scores, SwiGLU's F-wide hidden, and the
multiply-adds of forward + backward (3× the forward). Indexing shapes come from
`glassllm.shapes.index_shape`, which agrees with NumPy (shapes and messages) and never
indexes anything.
"""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from glassllm import Tensor, shapes
from glassllm.sandbox import registry as R
from glassllm.shapes import index_shape, matmul_cost

LIMITS = {"max_result_elements": 4_000_000, "max_matmul_madds": 10**9}   # the defaults
P = R.probe


def plan(op: str, **args):
    return R.OPS[op].plan(args)


def refused(p: R.Plan) -> R.LimitError:
    with pytest.raises(R.LimitError) as err:
        R.check_limits(p, **LIMITS)
    return err.value


# --------------------------------------------------------------------------------------
# matmul and the layer ops: intermediates and multiply-adds, forward + backward
# --------------------------------------------------------------------------------------

def test_matmul_cost_counts_the_backward():
    """L1.1: g @ bᵀ and aᵀ @ g cost what the forward does; a 2-D weight's gradient is
    folded (autograd.matmul), a batched operand under a bigger batch is not."""
    out, sizes, madds = matmul_cost((200, 1, 500), (500, 1000))
    assert out == (200, 1, 1000) and madds == 3 * 200 * 500 * 1000
    assert sizes == (200_000, 100_000, 500_000)                # out, grad x, grad weight
    out, sizes, madds = matmul_cost((1, 4, 100), (500, 100, 4))
    assert out == (500, 4, 4) and sizes == (8000, 500 * 4 * 100, 500 * 100 * 4)


def test_linear_counts_multiply_adds_forward_and_backward():
    """QA: x (2000, 1, 500) @ (500, 1000) was a 200 after 52 s and 8 GB."""
    p = plan("linear", x=P((2000, 1, 500)), weight=P((500, 1000)))
    assert p.shape == (2000, 1, 1000) and p.madds == 3_000_000_000
    err = refused(p)
    assert err.input == "x, weight" and "3000000000 multiply-adds" in err.rule
    small = plan("linear", x=P((200, 1, 500)), weight=P((500, 1000)))
    assert small.madds == 300_000_000
    R.check_limits(small, **LIMITS)                            # folded gradient: fine


def test_swiglu_counts_the_f_wide_hidden_and_all_three_products():
    p = plan("swiglu", x=P((200, 1, 500)), w1=P((500, 1000)), w2=P((1000, 500)),
             w3=P((500, 1000)))
    assert p.madds == 3 * 3 * 200 * 500 * 1000
    assert ("x, w1, w3", 200 * 1000) in p.sizes
    wide = plan("swiglu", x=P((64, 128, 64)), w1=P((64, 1024)), w2=P((1024, 64)),
                w3=P((64, 1024)))
    err = refused(wide)
    assert err.input == "x, w1" and "8388608 elements" in err.rule   # B·n·F = 64·128·1024


def test_attention_counts_scores_and_every_product():
    # x (B=2, n=3, d=4), H=2, Hkv=1, dk=2. Forward multiply-adds: q 2·3·4·4 = 96, k and v
    # 2·3·4·2 = 48 each, q·kᵀ 2·2·3·2·3 = 72, weights·v 72, wo 2·3·4·4 = 96: 432.
    args = {"x": P((2, 3, 4)), "wq": P((4, 4)), "wk": P((4, 2)), "wv": P((4, 2)),
            "wo": P((4, 4)), "n_heads": 2, "n_kv_heads": 1, "cos": P((3, 1)), "sin": P((3, 1))}
    p = plan("attention", **args)
    assert p.shape == (2, 3, 4) and p.madds == 3 * 432
    assert ("x, n_heads", 2 * 2 * 3 * 3) in p.sizes            # scores (B, H, n, n)
    long = {**args, "x": P((1, 2048, 8)), "wq": P((8, 8)), "wk": P((8, 8)), "wv": P((8, 8)),
            "wo": P((8, 8)), "n_heads": 4, "n_kv_heads": 4, "cos": P((2048, 1)),
            "sin": P((2048, 1))}
    err = refused(plan("attention", **long))
    assert err.input == "x, n_heads" and "16777216 elements" in err.rule   # 4 · 2048²


def test_transformer_block_adds_the_ffn_to_attention():
    w = {"x": P((2, 3, 4)), "attn_norm": P((4,)), "wq": P((4, 4)), "wk": P((4, 2)),
         "wv": P((4, 2)), "wo": P((4, 4)), "ffn_norm": P((4,)), "w1": P((4, 8)),
         "w2": P((8, 4)), "w3": P((4, 8)), "n_heads": 2, "n_kv_heads": 1, "cos": P((3, 1)),
         "sin": P((3, 1)), "eps": 1e-6}
    p = plan("transformer_block", **w)
    ffn = 3 * (2 * 3 * 4 * 8) * 3                               # three (6 × 4 × 8) products
    assert p.madds == 3 * 432 + ffn
    assert p.madds_blame == "x, wq, wk, wv, wo, w1, w2, w3"


def test_layer_example_plans_match_the_library():
    for name in ("linear", "swiglu", "attention", "transformer_block"):
        op = R.OPS[name]
        args = R.coerce_inputs(op, op.examples[0].inputs)
        assert op.plan(args).shape == R.run(op, args).value.shape, name


def _graph(out) -> list:
    """Every tensor `out` was computed from, itself included."""
    seen, stack, nodes = set(), [out], []
    while stack:
        t = stack.pop()
        if id(t) not in seen:
            seen.add(id(t))
            nodes.append(t)
            stack.extend(t._parents)
    return nodes


@pytest.mark.parametrize("name", ["linear", "swiglu", "attention", "transformer_block"])
def test_a_layer_plan_counts_the_products_its_composed_lines_run(name):
    """The plan is costed from the layer's composed lines (glassllm.layers, what the op
    runs): its multiply-adds are those of every matmul node the layer records, 3× the
    forward's (matmul_cost), and its largest planned array is at least the largest one
    the layer makes (attention's (B, H, n, n) scores, SwiGLU's F-wide hidden)."""
    op = R.OPS[name]
    rng = np.random.default_rng(0)
    args = {"x": (2, 5, 8), "weight": (8, 6), "w1": (8, 12), "w2": (12, 8), "w3": (8, 12),
            "wq": (8, 8), "wk": (8, 4), "wv": (8, 4), "wo": (8, 8), "attn_norm": (8,),
            "ffn_norm": (8,), "cos": (5, 2), "sin": (5, 2)}
    values = {}
    for spec in op.inputs:
        if spec.name in args:
            values[spec.name] = rng.normal(size=args[spec.name])
        elif spec.kind == "int":
            values[spec.name] = {"n_heads": 2, "n_kv_heads": 1}[spec.name]
    planned = op.plan(values)
    kinds = {spec.name: spec.kind for spec in op.inputs}
    out = op.fn(**{k: Tensor(v, requires_grad=True) if kinds[k] == "tensor" else v
                   for k, v in values.items()})
    nodes = _graph(out)
    products = [t for t in nodes if t.op == "matmul"]
    assert planned.shape == out.shape and products
    assert planned.madds == sum(matmul_cost(a.shape, b.shape)[2]
                                for a, b in (t._parents for t in products))
    assert max(t.size for t in nodes) <= max(planned.size, *(n for _, n in planned.sizes))


ARRAY_KINDS = ("tensor", "array", "table", "int_array", "bool_mask")


def broadcasty(rng: random.Random, op: R.Op, args: dict) -> dict:
    """A variant of an example's inputs that NumPy might still broadcast: each array input
    kept, or given a leading axis (of 1, 2 or 3), an inserted axis of 1, one axis doubled
    or cut to 1, or flattened; an int input (head counts, repeats) maybe changed."""
    out = dict(args)
    for spec in op.inputs:
        if spec.kind == "int" and rng.random() < 0.3:
            out[spec.name] = rng.choice([1, 2, 3, 4])
        if spec.kind not in ARRAY_KINDS or rng.random() < 0.4:
            continue
        a = np.asarray(out[spec.name])
        r = rng.random()
        if r < 0.25 or not a.ndim:
            a = np.broadcast_to(a, (rng.choice([1, 2, 3]), *a.shape)).copy()
        elif r < 0.45:
            a = np.expand_dims(a, rng.randrange(a.ndim + 1))
        elif r < 0.65:
            ax = rng.randrange(a.ndim)
            a = np.concatenate([a, a], axis=ax)
        elif r < 0.8:
            a = np.take(a, [0], axis=rng.randrange(a.ndim))
        else:
            a = a.reshape(-1)
        out[spec.name] = a
    return out


CASES = [(op, k) for op in R.OPS.values() for k in range(len(op.examples))]


@pytest.mark.parametrize("op,k", CASES, ids=[f"{op.name}-{k}" for op, k in CASES])
def test_every_plan_is_what_the_library_does(op, k):
    """H5 (QA pass 3, defect 1): for every registry op, its examples and 120 broadcast-y
    variants of each, the plan refuses exactly what the library refuses, and otherwise its
    shape is the real output's — so a refusal comes before any work and the limits are
    checked against the array that will be built (a block's gain of shape (20000, 1, 1, d)
    was planned as (B, n, d) and built as (20000, B, n, d))."""
    rng = random.Random(f"{op.name}-{k}")
    base = R.coerce_inputs(op, op.examples[k].inputs)
    agreed = {"planned": 0, "refused": 0}
    for i in range(121):
        args = broadcasty(rng, op, base) if i else base
        shapes = {name: np.shape(v) for name, v in args.items()}
        try:
            planned = op.plan(args).shape
        except (ValueError, IndexError, TypeError) as exc:
            with np.errstate(all="ignore"), pytest.raises((ValueError, IndexError, TypeError)):
                R.run(op, args)
            assert i, f"the example itself is refused: {exc}"
            agreed["refused"] += 1
            continue
        with np.errstate(all="ignore"):
            value = R.run(op, args).value                # raises if the plan let it through
        assert value.shape == planned, (shapes, planned, value.shape)
        agreed["planned"] += 1
    assert agreed["planned"] >= 1


# --------------------------------------------------------------------------------------
# indexing: analytic, NumPy's rules, no work proportional to the result
# --------------------------------------------------------------------------------------

def random_index(rng: random.Random, ndim: int):
    def item():
        r = rng.random()
        if r < 0.15:
            return rng.randint(-4, 4)
        if r < 0.3:
            return slice(rng.choice([None, -3, 0, 1, 5]), rng.choice([None, -2, 0, 3, 6]),
                         rng.choice([None, 1, 2, -1]))
        if r < 0.4:
            return None
        if r < 0.47:
            return Ellipsis
        shape = tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 2)))
        values = np.random.default_rng(rng.randint(0, 99))
        if r < 0.75:
            return values.integers(-4, 4, size=shape)
        return values.random(shape) < 0.5
    items = tuple(item() for _ in range(rng.randint(0, ndim + 2)))
    return items[0] if len(items) == 1 and rng.random() < 0.3 else items


def test_index_shape_agrees_with_numpy_shapes_and_messages():
    """L2.2: basic and advanced indexing, masks, None, "...", adjacency, bounds, broadcast."""
    rng = random.Random(0)
    outcomes = set()
    for _ in range(4000):
        shape = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 4)))
        index = random_index(rng, len(shape))
        try:
            want = np.zeros(shape)[index].shape
        except IndexError as exc:
            want = f"IndexError: {exc}"
        try:
            got = index_shape(shape, index)
        except IndexError as exc:
            got = f"IndexError: {exc}"
        assert got == want, (shape, index)
        outcomes.add(want if isinstance(want, str) else "ok")
    assert "ok" in outcomes and any("out of bounds" in o for o in outcomes)
    assert any("did not match" in o for o in outcomes) and any("broadcast" in o for o in outcomes)


def test_getitem_plan_refuses_a_huge_advanced_index_without_indexing(monkeypatch):
    """QA: [[1.0]][rows (60000, 1), cols (1, 60000)] (~360 KB) took 20 s to be refused:
    indexing the zero-byte probe walked 3.6e9 positions."""
    rows, cols = np.zeros((60000, 1), dtype=np.int64), np.zeros((1, 60000), dtype=np.int64)

    def no_probe(shape):
        raise AssertionError("the plan must not probe an advanced index")
    monkeypatch.setattr(R, "probe", no_probe)
    monkeypatch.setattr(shapes, "probe", no_probe)
    tracemalloc.start()
    try:
        p = plan("getitem", a=np.ones((1, 1)), index=(rows, cols))
        err = refused(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert p.shape == (60000, 60000)
    assert err.input == "a, index" and "3600000000 elements" in err.rule
    assert peak < 2_000_000, f"the plan allocated {peak} bytes"       # the index: 960 KB


def test_embedding_plan_is_analytic_too():
    ids = np.zeros(1_000_000, dtype=np.int64)
    tracemalloc.start()
    try:
        p = plan("embedding", weight=P((4, 1000)), ids=ids)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert p.shape == (1_000_000, 1000) and refused(p).input == "weight, ids"
    assert peak < 100_000, f"the plan allocated {peak} bytes"    # min and max of the ids
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 4"):
        plan("embedding", weight=P((4, 2)), ids=np.array([[0, 7]]))

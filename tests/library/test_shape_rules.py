"""Every op's shape rule against something independent of it (SPEC H5, L0.4, L0.5).

For each op of the registry, hypothesis draws many random shapes (and axes, indices,
head counts) and checks its plan — the op's one shape rule — against NumPy and against
a real backward:

- the output shape against NumPy computing the same thing on real arrays
  (`np.broadcast_shapes`, `np.matmul`, `np.sum(axis=…)`, real indexing, `np.repeat`),
  and a refusal exactly where NumPy refuses;
- the real run's output shape against the plan;
- the summed axes against the gradients a real backward produces: the op is run once
  with every input broadcast up front (so no gradient is summed) and once as given, and
  the second gradient must be the first summed over the rule's axes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from glassllm import Tensor, layers
from glassllm import autograd as ag
from glassllm.errors import InputError, ShapeError
from glassllm.sandbox import registry as R
from glassllm.shapes import matmul_promoted

REFUSED = (ValueError, IndexError, TypeError)
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=3)
nd_shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3)


def rand(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape)


def pair(draw) -> tuple[tuple, tuple]:
    """Two shapes that broadcast (most draws) or may not."""
    if draw(st.booleans()):
        return draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4,
                                                      max_side=3)).input_shapes
    return draw(shapes), draw(shapes)


# --------------------------------------------------------------------------------------
# per op: (args of the plan, NumPy's independent output shape — or its exception)
# --------------------------------------------------------------------------------------

def _binary(draw, first="a", second="b"):
    sa, sb = pair(draw)
    return {first: rand(sa), second: rand(sb, 1)}, lambda: np.broadcast_shapes(sa, sb)


def _unary(draw, name="a"):
    s = draw(shapes)
    return {name: rand(s)}, lambda: np.exp(np.ones(s)).shape


def _along_axis(draw, name="a"):
    """softmax's axis: valid where NumPy's sum over it is (a 0-d array takes 0 and -1, as
    torch.softmax(t, -1) does on a 0-d t), shape unchanged."""
    s = draw(shapes)
    axis = draw(st.integers(-len(s) - 1, len(s)))
    return {name: rand(s), "axis": axis}, lambda: np.sum(np.ones(s), axis=axis) is not None and s


def _reduce(draw):
    s = draw(nd_shapes)
    axis = draw(st.none() | st.integers(-len(s) - 1, len(s))
                | st.lists(st.integers(-len(s), len(s) - 1), max_size=3).map(tuple))
    keepdims = draw(st.booleans())
    return ({"a": rand(s), "axis": axis, "keepdims": keepdims},
            lambda: np.sum(np.ones(s), axis=axis, keepdims=keepdims).shape)


def _matmul(draw):
    sa, sb = draw(nd_shapes), draw(nd_shapes)
    if draw(st.booleans()):                                   # make the inner sizes agree
        sb = (*sb[:-2], sa[-1], sb[-1]) if len(sb) > 1 else (sa[-1],)
    return {"a": rand(sa), "b": rand(sb, 1)}, lambda: np.matmul(np.ones(sa), np.ones(sb)).shape


def _reshape(draw):
    s = draw(shapes)
    size = int(np.prod(s))
    new = draw(st.sampled_from([(size,), (-1,), (1, size), (size, -1), (2, -1), (-1, -1), ()]))
    return {"a": rand(s), "shape": list(new)}, lambda: np.ones(s).reshape(new).shape


def _transpose(draw):
    s = draw(shapes)
    axes = draw(st.none() | st.permutations(range(len(s))).map(list)
                | st.lists(st.integers(-4, 4), max_size=4))
    return {"a": rand(s), "axes": axes}, lambda: np.ones(s).transpose(axes).shape


def _index_item(draw, n: int):
    return draw(st.one_of(
        st.integers(-n - 1, n), st.none(), st.just(Ellipsis),
        st.builds(slice, st.none() | st.integers(-4, 4), st.none() | st.integers(-4, 4),
                  st.none() | st.sampled_from([-2, -1, 1, 2])),
        hnp.arrays(np.int64, hnp.array_shapes(max_dims=2, max_side=3),
                   elements=st.integers(-n - 1, n))))


def _getitem(draw):
    s = draw(nd_shapes)
    items = tuple(_index_item(draw, s[min(i, len(s) - 1)])
                  for i in range(draw(st.integers(1, len(s) + 1))))
    index = items if len(items) > 1 else items[0]
    return {"a": rand(s), "index": index}, lambda: np.ones(s)[index].shape


def _embedding(draw):
    v, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    ids = draw(hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
                          elements=st.integers(-v - 1, v)))
    return {"weight": rand((v, d)), "ids": ids}, lambda: np.ones((v, d))[ids].shape


def _where(draw):
    sc, sa, sb = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3,
                                                        max_side=3)).input_shapes
    return ({"condition": rand(sc) > 1.0, "a": rand(sa), "b": rand(sb, 1)},
            lambda: np.where(np.ones(sc, bool), np.ones(sa), np.ones(sb)).shape)


def _masked_fill(draw):
    sa, sm = pair(draw)
    return ({"a": rand(sa), "mask": rand(sm) > 1.0, "value": 0.0},
            lambda: np.where(np.ones(sm, bool), 0.0, np.ones(sa)).shape)


def _cross_entropy(draw, out=lambda n, v: ()):
    n, v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    logits = draw(st.sampled_from([(n, v), (n,), (n, v, 1)]))
    targets = draw(hnp.arrays(np.int64, st.sampled_from([(n,), (n + 1,), (n, 1)]),
                              elements=st.integers(-v - 1, v)))

    def numpy_shape():
        if len(logits) != 2 or targets.shape != (n,):
            raise ValueError("not (N, V) and (N,)")
        np.ones(logits)[np.arange(n), targets]                # NumPy's gather: its IndexError
        return out(n, v)
    return {"logits": rand(logits), "targets": targets}, numpy_shape


def _rope(draw):
    x = draw(nd_shapes)
    x = (*x[:-1], 2 * x[-1]) if draw(st.booleans()) else x
    table = draw(st.sampled_from([(*x[-2:-1], x[-1] // 2), (x[-1] // 2,), (1, 1), (3, 5)]))

    def numpy_shape():
        if x[-1] % 2 or np.broadcast_shapes((*x[:-1], x[-1] // 2), table) != (*x[:-1],
                                                                              x[-1] // 2):
            raise ValueError("tables must broadcast to the pairs of x")
        return x
    return {"x": rand(x), "cos": rand(table), "sin": rand(table, 1)}, numpy_shape


def _repeat_kv(draw):
    x = draw(st.sampled_from([4, 4, 3])) * (2,)
    repeats = draw(st.integers(0, 3))

    def numpy_shape():
        if repeats < 1 or len(x) != 4:
            raise ValueError("repeats ≥ 1, x 4-D")
        return np.repeat(np.ones(x), repeats, axis=1).shape
    return {"x": rand(x), "repeats": repeats}, numpy_shape


def _rms_norm(draw):
    x = draw(nd_shapes)
    return ({"x": rand(x), "weight": rand(x[-1:], 1), "eps": 1e-6},
            lambda: (np.ones(x) * np.ones(x[-1:])).shape)


def _linear(draw):
    x, d_out = draw(nd_shapes), draw(st.integers(1, 3))
    return ({"x": rand(x), "weight": rand((x[-1], d_out), 1)},
            lambda: np.matmul(np.ones(x), np.ones((x[-1], d_out))).shape)


def _swiglu(draw):
    x, f = draw(nd_shapes), draw(st.integers(1, 3))
    d = x[-1]
    return ({"x": rand(x), "w1": rand((d, f)), "w2": rand((f, d)), "w3": rand((d, f), 1)},
            lambda: (np.ones(x) @ np.ones((d, f)) @ np.ones((f, d))).shape)


def _attention_inputs(draw):
    b, n = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    h, group = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    hkv, dk = h, 2
    h = h * group
    d = h * dk
    cos, sin = layers.rope_angles(n, dk)
    args = {"x": rand((b, n, d)), "wq": rand((d, h * dk)), "wk": rand((d, hkv * dk)),
            "wv": rand((d, hkv * dk), 1), "wo": rand((h * dk, d), 2), "n_heads": h,
            "n_kv_heads": hkv, "cos": cos, "sin": sin}
    return args, lambda: (b, n, d)


def _block(draw):
    args, numpy_shape = _attention_inputs(draw)
    d, f = args["x"].shape[-1], draw(st.integers(1, 3))
    args.update(attn_norm=rand(d), ffn_norm=rand(d, 1), w1=rand((d, f)), w2=rand((f, d)),
                w3=rand((d, f), 1), eps=1e-6)
    return args, numpy_shape


CASES = {
    **{name: _binary for name in ("add", "sub", "mul", "div")},
    "pow": lambda draw: _binary(draw, "a", "exponent"),
    "rpow": lambda draw: _binary(draw, "base", "exponent"),
    **{name: _unary for name in ("neg", "exp", "log", "sqrt", "sigmoid", "silu",
                                         "relu", "tanh", "gelu", "gelu_tanh")},
    "matmul": _matmul, "tsum": _reduce, "mean": _reduce, "max": _reduce,
    "reshape": _reshape, "transpose": _transpose, "getitem": _getitem, "where": _where,
    "embedding": _embedding, "masked_fill": _masked_fill,
    "softmax": _along_axis, "log_softmax": _along_axis,
    "softmax_np": lambda draw: _along_axis(draw, "x"),
    "cross_entropy": _cross_entropy,
    "cross_entropy_grad": lambda draw: _cross_entropy(draw, lambda n, v: (n, v)),
    "rope": _rope, "repeat_kv": _repeat_kv, "rms_norm": _rms_norm, "linear": _linear,
    "swiglu": _swiglu, "attention": _attention_inputs, "transformer_block": _block,
}


def test_every_op_of_the_registry_has_a_case():
    assert set(CASES) == set(R.OPS)


def _full_gradients(op: R.Op, args: dict, g: np.ndarray) -> dict[str, np.ndarray]:
    """The op's gradients with every broadcast done up front (so nothing is summed): each
    tensor input at the shape its gradient is computed at, per the broadcasting of NumPy."""
    if op.name in ("matmul", "linear"):
        a, b = (args[n] for n in op.differentiable)
        sa, sb = matmul_promoted(a.shape, b.shape)
        batch = np.broadcast_shapes(sa[:-2], sb[:-2])
        full = [Tensor(np.broadcast_to(v.reshape(s), (*batch, *s[-2:])).copy(),
                       requires_grad=True) for v, s in ((a, sa), (b, sb))]
        out = ag.matmul(*full)
        seed = g.reshape(out.shape)
    elif op.name == "rms_norm":                  # rms_norm(x, w) = rms_norm(x, 1) * w
        x = Tensor(args["x"], requires_grad=True)
        w = Tensor(np.broadcast_to(args["weight"], args["x"].shape).copy(), requires_grad=True)
        full = [x, w]
        out, seed = ag.mul(layers.rms_norm(x, np.ones(args["x"].shape[-1]), 1e-6), w), g
    else:                                        # elementwise: every input at the output shape
        shape = g.shape
        call, full = [], []
        for spec in op.inputs:
            value = args[spec.name]
            if spec.kind == "tensor":
                value = Tensor(np.broadcast_to(value, shape).copy(), requires_grad=True)
                full.append(value)
            call.append(value)
        out, seed = op.fn(*call), g
    out.backward(seed)
    return {name: t.grad for name, t in zip(op.differentiable, full, strict=True)}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_shape_rule_agrees_with_numpy_and_a_real_backward(name, data):
    op = R.OPS[name]
    args, numpy_shape = CASES[name](data.draw)
    args = {spec.name: args.get(spec.name, spec.default) for spec in op.inputs}
    try:
        expected = tuple(numpy_shape())
    except REFUSED:
        with pytest.raises(REFUSED):
            op.plan(args)
        return
    plan = op.plan(args)
    assert plan.shape == expected, (name, {k: np.shape(v) for k, v in args.items()})
    with np.errstate(all="ignore"):
        seed = rand(plan.shape, 3) if op.output == "tensor" else None
        result = R.run(op, args, None, seed)
        assert result.value.shape == expected
        summed = {n: axes for n, axes in plan.summed.items() if n in op.differentiable}
        if not summed or op.output != "tensor":
            return
        full = _full_gradients(op, args, seed)
    for input_name, axes in summed.items():
        shape = np.shape(args[input_name])
        if op.name in ("matmul", "linear"):
            shape = matmul_promoted(*(np.shape(args[n]) for n in op.differentiable)
                                    )[op.differentiable.index(input_name)]
        want = full[input_name].sum(axis=axes, keepdims=True).reshape(shape)
        np.testing.assert_allclose(want.reshape(result.grads[input_name].shape),
                                   result.grads[input_name], rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------
# where two paths disagreed, one wins
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: ag.repeat_kv(Tensor(np.ones((1, 1, 1, 1))), 0),
    lambda: R.OPS["repeat_kv"].plan({"x": np.ones((1, 1, 1, 1)), "repeats": 0}),
    lambda: layers.attention_shape((1, 1, 2), (2, 2), (2, 2), (2, 2), (2, 2), 0, 1, (1, 1),
                                   (1, 1)),
    lambda: R.OPS["attention"].plan({**_ATTN, "n_kv_heads": 0}),
])
def test_a_count_below_one_is_one_input_error_on_every_path(call):
    """repeat_kv's repeats and a head count below 1: the op, its plan and the layer's
    shape contract raise the same class, an InputError that is not a ShapeError (the
    service answers 422 for it, not 400), naming the count."""
    with pytest.raises(InputError) as err:
        call()
    assert not isinstance(err.value, ShapeError)
    assert err.value.input in ("repeats", "n_heads", "n_kv_heads")
    assert "must be a positive int" in str(err.value)


_ATTN = {"x": np.ones((1, 1, 2)), "wq": np.ones((2, 2)), "wk": np.ones((2, 2)),
         "wv": np.ones((2, 2)), "wo": np.ones((2, 2)), "n_heads": 1, "n_kv_heads": 1,
         "cos": np.ones((1, 1)), "sin": np.ones((1, 1))}


def test_the_ledger_of_rms_norm_and_rope_is_their_rule():
    """expr.ELEMENTWISE listed rope and rms_norm; the registry did not plan them as
    elementwise. Now the ledger reads the rule: rms_norm's weight is summed over every
    axis of x but the last, rope's x over none."""
    from glassllm.sandbox.expr import evaluate

    out = evaluate("rms_norm(x, w)", {"x": np.ones((2, 3, 4)), "w": np.ones(4)})
    ledger = out["nodes"][-1]["ledger"]
    assert [e["summed_axes"] for e in ledger] == [[], [0, 1]]
    cos, sin = layers.rope_angles(3, 4)
    out = evaluate("rope(x, cos, sin)", {"x": np.ones((2, 3, 4)), "cos": cos, "sin": sin})
    assert [e["summed_axes"] for e in out["nodes"][-1]["ledger"]] == [[]]


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app
    from glassllm_service.settings import Settings

    with TestClient(create_app(Settings())) as c:
        yield c


def _attention_body(**change) -> dict:
    inputs = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in _ATTN.items()}
    return {"inputs": {**inputs, **change}}


@pytest.mark.parametrize("count", ["n_heads", "n_kv_heads"])
def test_a_head_count_below_one_is_422_through_the_ops_and_the_eval_route(client, count):
    """Where two paths disagreed: the op route's plan said 422 (a wrong int value), the
    layer's own check a ShapeError (400). The 422 wins on every path, naming the count."""
    r = client.post("/api/v1/ops/attention", json=_attention_body(**{count: 0}))
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert (err["code"], err["op"], err["input"]) == ("invalid_input", "attention", count)
    assert err["message"] == f"attention: {count} must be a positive int, got 0"
    variables = {k: v for k, v in _attention_body()["inputs"].items() if "heads" not in k}
    heads = {"n_heads": 1, "n_kv_heads": 1, count: 0}
    source = ("attention(x, wq, wk, wv, wo, n_heads={n_heads}, n_kv_heads={n_kv_heads},"
              " cos=cos, sin=sin)").format(**heads)
    r = client.post("/api/v1/eval", json={"expression": source, "variables": variables})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_expression"
    assert f"{count} must be a positive int, got 0" in r.json()["error"]["message"]


def test_repeats_below_one_is_422_with_the_library_s_words(client):
    r = client.post("/api/v1/ops/repeat_kv", json={"inputs": {"x": [[[[1.0]]]], "repeats": 0}})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "repeat_kv: repeats must be a positive int, got 0"
    assert r.json()["error"]["input"] == "repeats"


def test_grad_output_shape_is_one_check_written_for_its_caller(client):
    """One check (prepare): a wire request reads JSON lists, a Python caller tuples."""
    r = client.post("/api/v1/ops/neg", json={"inputs": {"a": [1.0, 2.0]},
                                             "grad_output": [1.0, 2.0, 3.0]})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == ("input 'grad_output': has shape [3] but the output"
                                            " of neg has shape [2]")
    with pytest.raises(InputError, match=r"has shape \(3,\) but the output of neg has shape"
                                         r" \(2,\)"):
        R.run(R.OPS["neg"], {"a": np.zeros(2)}, None, np.zeros(3))


def test_prepare_knows_the_cost_before_any_compute():
    """Prepared.cost, for cost-weighted admission: a (2, 3) @ (3, 4) product builds its
    output (8), both gradients (6 and 12) and takes 3 · 24 multiply-adds."""
    prepared = R.prepare(R.OPS["matmul"], {"a": np.ones((2, 3)).tolist(),
                                           "b": np.ones((3, 4)).tolist()})
    assert prepared.cost == (8 + 8 + 6 + 12, 72)
    assert R.run(prepared).value.tolist() == np.full((2, 4), 3.0).tolist()


def test_a_0d_array_takes_axis_0_or_minus_1_as_numpy_does():
    """L2.1: NumPy reduces a 0-d array over the single axis 0 or -1 (to itself) but not over
    (0,) or 1; reduce_shape, and the service's plans built on it, say the same."""
    import numpy as np

    from glassllm.shapes import reduce_shape

    for axis in (0, -1, np.int64(0), None, ()):
        assert reduce_shape((), axis) == np.sum(np.array(3.0), axis=axis).shape == ()
    for axis in ((0,), (-1,), 1, -2):
        with pytest.raises(np.exceptions.AxisError):
            np.sum(np.array(3.0), axis=axis)
        with pytest.raises(np.exceptions.AxisError):
            reduce_shape((), axis)


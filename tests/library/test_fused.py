"""The fused nodes give the numbers of the composed lines they stand for (L6, L7):
``fused=True`` in ``glassllm.layers`` against the default, for attention, rms_norm and
swiglu; the default runs without any fused node; the training loop runs the fused ones.

Exact or rounded (docs/testing.md): the fused attention stacks the r query heads of a
group into one (r·n, dk) product and projects x as one (B·n, d) product, the composed
lines run one (n, dk) product per head and per batch row; the fused swiglu multiplies
blocks of 64 rows; the fused backwards sum with einsum where the composed ones sum a
product. BLAS picks its kernel by CPU and by shape (OpenBLAS's DYNAMIC_ARCH: with or
without fused multiply-adds, other blockings), so those sums may run in another order
and the two forms agree to the rounding bound of tests/rounding.py, derived for each
chain below. Only rms_norm's forward is compared bit for bit: the fused node runs the
composed lines' own NumPy operations (x·x, one np.sum over the last axis, /d, +eps,
sqrt, 1/, two products) on the same arrays, and each of them rounds the same on every CPU.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from rounding import assert_rounding_close

from glassllm import Tensor, layers
from glassllm.fast import fused
from glassllm.gradients.checks import gradcheck
from glassllm.layers import ATTENTION_PROBE, GlassConfig, GlassLM, rope_angles
from glassllm.training.stream import attention_maps, train_steps

SQRT2 = math.sqrt(2.0)


def _floats(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats in [lo, hi], with magnitudes below 1e-100 drawn as 0: no product of a few of
    them underflows, where rounding errors stop being relative (tests/rounding.py)."""
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(
        lambda v: 0.0 if abs(v) < 1e-100 else v)


def _amax(*arrays) -> float:
    """The largest |entry| over the arrays (0 for empty ones)."""
    return max(float(np.max(np.abs(a), initial=0.0)) for a in arrays)


def _core_bounds(qmax, kmax, vmax, gmax, n, dk, r, carried=0):
    """{name: (roundings, scale)} of causal attention's out and of q's, k's and v's
    gradients (tests/rounding.py), from bounds on |q|, |k|, |v|, |g| (every entry), n
    keys, head width dk and r query heads per key/value head; ``carried``: roundings that
    q, k, v and g already carry (relative to those bounds).

    Forward: the scores sum dk terms, |s| ≤ A = √dk·|q|·|k|; softmax (max, exp: 2, sum of
    n, divide) moves p_j by at most 2·p_j·max|δs| for an error δs of the scores, so the
    scores' rounding (and q's and k's: twice) counts 1 + 4A times; out = p·v sums n terms
    with Σ p_j|v_j| ≤ |v| (Σ p = 1).
    Backward: dp = g·vᵀ (dk terms, |dp| ≤ D = dk·|g|·|v|), ds = p·(dp − Σ p·dp) (n terms,
    |ds| ≤ 2·p·D), gq = ds·k/√dk (n terms: Σ 2p·D·|k| ≤ 2D|k|), gk = dsᵀ·q/√dk (r·n
    terms), gv = pᵀ·g (r·n terms); p's error counts 1 + 4A times as in the forward.
    """
    A = math.sqrt(dk) * qmax * kmax
    amp = 1.0 + 4.0 * A
    n_out = carried + dk + 1 + (n + 4) + n
    n_grad = n_out + dk + (n + 3) + r * n
    D = dk * gmax * vmax
    return {"out": (n_out, vmax * amp),
            "q": (n_grad, 2 * D * kmax / math.sqrt(dk) * amp),
            "k": (n_grad, r * n * 2 * D * qmax / math.sqrt(dk) * amp),
            "v": (n_grad, r * n * gmax * amp)}


def _layer_bounds(arrays, g, H, Hkv):
    """{name: (roundings, scale)} of the attention layer's out and of its five gradients,
    for x, wq, wk, wv, wo = arrays and the gradient g of out.

    q = rope(x·wq) sums d terms and rotates each pair (|q| ≤ √2·d·|x|·|wq|: a rotation
    keeps a pair's length; two roundings), likewise k, and v = x·wv (d terms); g·woᵀ sums
    d terms. With those bounds, `_core_bounds` gives the core's; then out = merged·wo sums
    H·dk terms, wo's gradient mergedᵀ·g and wq's, wk's, wv's x2ᵀ·G sum B·n terms, and x's
    G·[wq | wk | wv]ᵀ sums (H + 2·Hkv)·dk terms.
    """
    x, wq, wk, wv, wo = arrays
    B, n, d = x.shape
    dk = wq.shape[1] // H
    xm, gm = _amax(x), _amax(g)
    Q, K = SQRT2 * d * xm * _amax(wq), SQRT2 * d * xm * _amax(wk)
    V, G = d * xm * _amax(wv), d * gm * _amax(wo)
    core = _core_bounds(Q, K, V, G, n, dk, H // Hkv, carried=2 * d + 2)
    (n_att, s_att), (n_grad, _) = core["out"], core["q"]
    s_head = SQRT2 * max(core[name][1] for name in "qkv")  # the gradient of x·w, per entry
    n_w = n_grad + 2 + max(B * n, (H + 2 * Hkv) * dk)
    return {"out": (n_att + H * dk, H * dk * _amax(wo) * s_att),
            "x": (n_w, (H + 2 * Hkv) * dk * _amax(wq, wk, wv) * s_head),
            "wq": (n_w, B * n * xm * SQRT2 * core["q"][1]),
            "wk": (n_w, B * n * xm * SQRT2 * core["k"][1]),
            "wv": (n_w, B * n * xm * core["v"][1]),
            "wo": (n_att + B * n, B * n * gm * s_att)}


def _assert_layer_close(out_f, out_c, fused, composed, g, H, Hkv, out=True):
    """The fused attention layer against its composed form, within `_layer_bounds`."""
    bounds = _layer_bounds([t.data for t in composed], g, H, Hkv)
    if out:
        assert_rounding_close(out_f.data, out_c.data, n=bounds["out"][0],
                              scale=bounds["out"][1], err_msg="out")
    for name, f, c in zip(["x", "wq", "wk", "wv", "wo"], fused, composed, strict=True):
        assert (f.grad is None) == (c.grad is None), name
        if c.grad is not None:
            rounds, scale = bounds[name]
            assert_rounding_close(f.grad, c.grad, n=rounds, scale=scale, err_msg=name)


def _layer_pair(rng, B, n, H, Hkv, dk, requires=(True,) * 5, values=None):
    """``layers.attention`` with ``fused=True`` and without (its composed lines), forward
    and backward, on the same x (B, n, H·dk) and weights (drawn by ``values(shape)`` when
    given); returns (out_f, out_c, fused inputs, composed inputs, g)."""
    d = H * dk
    shapes = [(B, n, d), (d, H * dk), (d, Hkv * dk), (d, Hkv * dk), (H * dk, d)]
    if values is None:
        arrays = [rng.normal(size=shapes[0])] + [rng.normal(size=s) * d**-0.5
                                                 for s in shapes[1:]]
        g = rng.normal(size=(B, n, d))
    else:
        arrays, g = [values(s) for s in shapes], values((B, n, d))
    cos, sin = rope_angles(n, dk)
    f = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    c = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    out_f = layers.attention(*f, H, Hkv, cos, sin, fused=True)
    out_c = layers.attention(*c, H, Hkv, cos, sin)
    if any(requires):
        out_f.backward(g)
        out_c.backward(g)
    return out_f, out_c, f, c, g


@pytest.mark.parametrize(("H", "Hkv", "dk"), [(4, 4, 4), (4, 2, 16), (4, 1, 2), (6, 3, 6)])
def test_fused_attention_equals_the_composed_lines_value_and_every_gradient(H, Hkv, dk):
    """Multi-head, GQA and multi-query; √dk a power of two (the fused node multiplies by
    its exact inverse) and not (it divides)."""
    rng = np.random.default_rng(H + dk)
    out_f, out_c, f, c, g = _layer_pair(rng, 2, 5, H, Hkv, dk)
    assert out_f.op == "attention" and out_c.op == "matmul" and out_f.shape == (2, 5, H * dk)
    # the projections are one (B·n, d) product there and B (n, d) products here, the
    # core's heads stacked or not, x's gradient one product for the three projections:
    # the same math, summed in another order (on an AMD EPYC, [4-2-16] differs in the
    # last bit of out)
    _assert_layer_close(out_f, out_c, f, c, g, H, Hkv)


def test_fused_attention_gives_the_gradient_only_to_inputs_that_require_it():
    rng = np.random.default_rng(8)
    for requires in [(True, False, False, False, False), (False, True, True, True, True),
                     (False, False, False, False, True), (False, False, False, True, False),
                     (False, True, False, False, False)]:
        out_f, out_c, f, c, g = _layer_pair(rng, 1, 4, 4, 2, 4, requires)
        _assert_layer_close(out_f, out_c, f, c, g, 4, 2, out=False)


def test_fused_attention_passes_the_gradient_checker():
    rng = np.random.default_rng(9)
    x, wq, wk, wv, wo = (Tensor(rng.normal(size=s), requires_grad=True)
                         for s in ((2, 3, 8), (8, 8), (8, 4), (8, 4), (8, 8)))
    cos, sin = rope_angles(3, 4)
    result = gradcheck(lambda *t: fused.attention(*t, 2, 1, cos, sin), x, wq, wk, wv, wo,
                       grad_output=rng.normal(size=(2, 3, 8)))
    assert result.passed, result


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 2), Hkv=st.integers(1, 3), r=st.integers(1, 3), n=st.integers(1, 7),
       half_dk=st.integers(1, 4), data=st.data())
def test_fused_attention_equals_the_composed_lines_for_any_shape(B, Hkv, r, n, half_dk, data):
    """Any grouping r = H/Hkv, length and (even) head width, any values in [−3, 3]."""
    H, dk = Hkv * r, 2 * half_dk
    out_f, out_c, f, c, g = _layer_pair(
        None, B, n, H, Hkv, dk,
        values=lambda s: data.draw(hnp.arrays(np.float64, s, elements=_floats(-3, 3))))
    # where a gradient cancels to ~0 (one position: softmax is 1 whatever q and k), both
    # are rounding noise of the size of the terms summed, which the bound is made of
    _assert_layer_close(out_f, out_c, f, c, g, H, Hkv)


def test_layers_attention_runs_the_composed_lines_unless_fused_is_asked():
    rng = np.random.default_rng(10)
    x, wq, wk, wv, wo = (Tensor(rng.normal(size=s))
                         for s in ((1, 3, 8), (8, 8), (8, 4), (8, 4), (8, 8)))
    cos, sin = rope_angles(3, 4)
    composed = layers.attention(x, wq, wk, wv, wo, 2, 1, cos, sin)
    one_node = layers.attention(x, wq, wk, wv, wo, 2, 1, cos, sin, fused=True)
    assert composed.op == "matmul" and one_node.op == "attention"
    bounds = _layer_bounds([t.data for t in (x, wq, wk, wv, wo)], np.zeros((1, 3, 8)), 2, 1)
    assert_rounding_close(one_node.data, composed.data, n=bounds["out"][0],
                          scale=bounds["out"][1])
    token = ATTENTION_PROBE.set(lambda weights: weights)  # the probe needs the weights
    try:
        assert layers.attention(x, wq, wk, wv, wo, 2, 1, cos, sin, fused=True).op == "matmul"
    finally:
        ATTENTION_PROBE.reset(token)


TWIN = GlassConfig(d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=24,
                   max_seq_len=8, vocab=32, seed=3)


def _twin_models():
    """Two identical small GQA models (same seed) and one batch: one runs fused, one not."""
    rng = np.random.default_rng(0)
    ids, targets = rng.integers(0, 32, size=(2, 8)), rng.integers(0, 32, size=(2, 8))
    return GlassLM(TWIN), GlassLM(TWIN), ids, targets


def _model_roundings(config: GlassConfig, tokens: int) -> int:
    """Roundings on the longest path through the model's loss and back: per block an
    RMSNorm (d + 4), the attention (projections and rope d + 2, scores dk + 1, softmax
    n + 4, p·v n, wo H·dk), a residual, an RMSNorm, swiglu (d, sigmoid and products 6, F)
    and a residual; the final norm, the head (d) and the cross-entropy (V + 4). The
    backward runs the same chain again, and a weight's gradient sums the B·n tokens."""
    d, n, F, V = config.d_model, config.max_seq_len, config.ffn_hidden, config.vocab
    dk = d // config.n_heads
    block = (d + 4) + (d + 2 + dk + 1 + n + 4 + n + d) + 1 + (d + 4) + (d + 6 + F) + 1
    forward = config.n_layers * block + (d + 4) + d + (V + 4)
    return 2 * forward + tokens


def _assert_model_close(fused_model, fused_loss, composed_model, composed_loss, ids):
    """The loss and every gradient within the rounding bound of `_model_roundings`: the
    loss is a mean of log Σ exp(z) − z_target, moved by at most 2·max|δz| by an error of
    the logits z, and its terms are bounded by max|z| + log V; a parameter's gradient sums
    one term per token, each bounded here by the largest entry of that gradient. (These
    small models amplify little from block to block: the differences measured on several
    OpenBLAS kernels are a few u times that scale, about 1 % of the bound.)"""
    rounds = _model_roundings(TWIN, ids.size)
    logits = composed_model(ids).data
    assert_rounding_close(fused_loss.item(), composed_loss.item(), n=rounds,
                          scale=2 * (_amax(logits) + math.log(TWIN.vocab)), err_msg="loss")
    for (name, p), (_, c) in zip(fused_model.named_parameters(),
                                 composed_model.named_parameters(), strict=True):
        assert_rounding_close(p.grad, c.grad, n=rounds, scale=ids.size * _amax(c.grad),
                              err_msg=name)


def test_model_loss_and_gradients_match_with_the_fused_layers():
    """The same two models (same seed), one through ``fused=True`` (rms_norm, attention
    and swiglu as one node each), one through the composed lines."""
    fused_model, composed_model, ids, targets = _twin_models()
    fused_loss = fused_model.loss(ids, targets, fused=True)
    composed_loss = composed_model.loss(ids, targets)
    fused_loss.backward()
    composed_loss.backward()
    _assert_model_close(fused_model, fused_loss, composed_model, composed_loss, ids)


class FusedNodeRan(AssertionError):
    """Raised by the fused nodes the fixture below replaces."""


@pytest.fixture
def no_fused_nodes(monkeypatch):
    """Every fused node raises: whatever still runs uses the composed lines only."""
    def refuse(*args, **kwargs):
        raise FusedNodeRan("a fused node ran")

    for name in fused.__all__:
        monkeypatch.setattr(fused, name, refuse)


def test_the_default_paths_run_no_fused_node(no_fused_nodes):
    """layers.attention (and the other layers), a GlassLM forward and backward, generation
    with and without the KV cache, and the attention maps: all composed."""
    rng = np.random.default_rng(1)
    cos, sin = rope_angles(3, 4)
    x = Tensor(rng.normal(size=(1, 3, 8)), requires_grad=True)
    w = [Tensor(rng.normal(size=s)) for s in ((8, 8), (8, 4), (8, 4), (8, 8))]
    out = layers.attention(x, *w, 2, 1, cos, sin)
    out.backward(np.ones(out.shape))
    assert x.grad.shape == (1, 3, 8)
    model = GlassLM(TWIN)
    ids = rng.integers(0, TWIN.vocab, size=(2, 8))
    model.loss(ids, ids).backward()
    assert all(p.grad is not None for p in model.parameters())
    prompt = np.array([1, 2, 3])
    tokens = [model.generate(prompt, 7, temperature=0, kv_cache=c).tolist() for c in (True, False)]
    assert tokens[0] == tokens[1] and len(tokens[0]) == 10
    assert attention_maps(model, prompt)["probs"].shape == (2, 4, 3, 3)
    with pytest.raises(FusedNodeRan):  # the fixture is in force
        layers.attention(x, *w, 2, 1, cos, sin, fused=True)


def test_the_training_loop_runs_the_fused_nodes(no_fused_nodes):
    data = np.random.default_rng(2).integers(0, TWIN.vocab, size=100)  # token ids (T,)
    with pytest.raises(FusedNodeRan):
        next(train_steps(GlassLM(TWIN), data, steps=1, batch_size=2))


def test_the_training_loop_records_one_node_per_fused_layer(monkeypatch):
    """Counted: per step, one attention node per block, one rms_norm per norm (two per
    block and the final one) and one swiglu per block; generation adds none."""
    calls: dict[str, int] = {}

    def counting(name, real):
        def counted(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)
        return counted

    for name in fused.__all__:
        monkeypatch.setattr(fused, name, counting(name, getattr(fused, name)))
    data = np.random.default_rng(2).integers(0, TWIN.vocab, size=100)  # token ids (T,)
    model = GlassLM(TWIN)
    infos = list(train_steps(model, data, steps=2, batch_size=2))
    assert len(infos) == 2 and np.isfinite(infos[-1].loss)
    L = TWIN.n_layers
    expected = {"attention": 2 * L, "rms_norm": 2 * (2 * L + 1), "swiglu": 2 * L}
    assert calls == expected
    model.generate(np.array([1, 2]), 3)
    assert calls == expected


def _assert_rms_close(fused, composed, g, eps):
    """rms_norm's gradients against the composed ops' (its forward is compared bit for bit).

    With r = 1/√(mean(x²) + eps) and y = x·r (|y| ≤ √d), x's gradient r·(gy − y·mean(gy·y))
    sums d terms of |gy·y| ≤ |g|·|w|·√d, so its terms are bounded by r·|g|·|w|·(1 + d);
    the weight's gradient sums the rows of g·y (|g|·√d each). The forward's d + 4
    roundings (the sum, /d, +eps, sqrt, 1/) come first.
    """
    x, w = (t.data for t in composed)
    d = x.shape[-1]
    rows = x.size // d if d else 0
    with np.errstate(divide="ignore"):
        r = _amax(1.0 / np.sqrt(np.mean(x * x, axis=-1) + eps))
    gm = _amax(g)
    bounds = {"x": (2 * d + 8, r * gm * _amax(w) * (1 + d)),
              "weight": (d + 5 + rows, rows * gm * math.sqrt(d))}
    for name, f, c in zip(["x", "weight"], fused, composed, strict=True):
        assert_rounding_close(f.grad, c.grad, n=bounds[name][0], scale=bounds[name][1],
                              err_msg=name)


def _rms_pair(x, w, g, eps):
    f = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    c = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    out_f = layers.rms_norm(*f, eps=eps, fused=True)
    out_c = layers.rms_norm(*c, eps=eps)
    out_f.backward(g)
    out_c.backward(g)
    assert out_f.op == "rms_norm" and out_c.op == "mul"
    # the same NumPy operations on the same arrays in the same order: the same bits on
    # every CPU (one np.sum over the last axis; every other step rounds once, elementwise)
    assert np.array_equal(out_f.data, out_c.data)
    _assert_rms_close(f, c, g, eps)  # einsum's sums: another order


@pytest.mark.parametrize("shape", [(8,), (3, 8), (2, 5, 8)])
def test_fused_rms_norm_equals_the_composed_lines(shape):
    rng = np.random.default_rng(len(shape))
    _rms_pair(rng.normal(size=shape), rng.normal(size=8), rng.normal(size=shape), 1e-5)


@settings(max_examples=40, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
       eps=st.sampled_from([0.0, 1e-6, 1e-5, 1.0]), data=st.data())
def test_fused_rms_norm_equals_the_composed_lines_for_any_shape(shape, eps, data):
    """Any leading axes and width; values away from an all-zero row when eps = 0."""
    values = st.floats(0.1, 40) | st.floats(-40, -0.1)
    x = data.draw(hnp.arrays(np.float64, shape, elements=values))
    w = data.draw(hnp.arrays(np.float64, shape[-1:], elements=_floats(-3, 3)))
    g = data.draw(hnp.arrays(np.float64, shape, elements=_floats(-3, 3)))
    _rms_pair(x, w, g, eps)


def test_fused_rms_norm_reference_value_and_gradient_checker():
    out = fused.rms_norm(Tensor([[3.0, 4.0]]), Tensor([1.0, 2.0]), eps=0.0)  # rms √12.5
    np.testing.assert_allclose(out.data, [[3 / 12.5**0.5, 8 / 12.5**0.5]], rtol=1e-15)
    rng = np.random.default_rng(3)
    x = Tensor(rng.normal(size=(2, 3, 4)), requires_grad=True)
    w = Tensor(rng.normal(size=4), requires_grad=True)
    assert gradcheck(fused.rms_norm, x, w, grad_output=rng.normal(size=(2, 3, 4))).passed


def _assert_swiglu_close(out_f, out_c, fused, composed, g):
    """swiglu against its composed form, within the rounding bound of each chain.

    Forward on N rows: a = x·w1 and b = x·w3 sum d terms (|a| ≤ A1 = d·|x|·|w1|, |b| ≤
    A3); u = silu(a) (|u| ≤ |a|, |silu'| ≤ 1.1, |silu''| ≤ 0.5; sigmoid's exp, add,
    divide, then the products: 6 roundings); out = (u·b)·w2 sums F terms of |u·b·w2|, and
    a's and b's errors count 1.1 + 1 times: 3·F·A1·A3·|w2|.
    Backward: gh = g·w2ᵀ sums d terms (|gh| ≤ GH); gb = gh·u, ga = gh·b·silu'(a), where
    a's error moves silu'(a) by 0.5·δa: |ga| counts GH·A3·(4 + A1); w1 and w3 sum N rows
    of x·ga and x·gb (the fused node by blocks of 64 rows), w2 N rows of h·g, and x F
    terms of ga·w1 and of gb·w3.
    """
    x, w1, w2, w3 = (t.data for t in composed)
    d, F = w1.shape
    N = x.size // d if d else 0
    xm, gm = _amax(x), _amax(g)
    A1, A3 = d * xm * _amax(w1), d * xm * _amax(w3)
    GH = w2.shape[1] * gm * _amax(w2)
    ga, gb = GH * A3 * (4 + A1), 3 * GH * A1
    n_out = d + 6 + F
    n_grad = n_out + d + 6 + max(N, F)
    assert_rounding_close(out_f.data, out_c.data, n=n_out, scale=3 * F * A1 * A3 * _amax(w2),
                          err_msg="out")
    bounds = {"x": F * (_amax(w1) * ga + _amax(w3) * gb), "w1": N * xm * ga,
              "w2": 3 * N * A1 * A3 * gm, "w3": N * xm * gb}
    for name, f, c in zip(["x", "w1", "w2", "w3"], fused, composed, strict=True):
        assert (f.grad is None) == (c.grad is None), name
        if c.grad is not None:
            assert_rounding_close(f.grad, c.grad, n=n_grad, scale=bounds[name], err_msg=name)


def _swiglu_pair(arrays, g, requires=(True, True, True, True)):
    """``layers.swiglu`` with ``fused=True`` and without, forward and backward, on the same
    arrays: (out_f, out_c, fused inputs, composed inputs)."""
    f = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    c = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    out_f, out_c = layers.swiglu(*f, fused=True), layers.swiglu(*c)
    out_f.backward(g)
    out_c.backward(g)
    return out_f, out_c, f, c


@pytest.mark.parametrize(("shape", "rows"), [((8,), 1), ((5, 8), 5), ((2, 3, 8), 6),
                                             ((64, 8), 64), ((150, 8), 150), ((0, 8), 0)])
def test_fused_swiglu_equals_the_composed_lines(shape, rows):
    """Any leading axes; the fused forward runs on blocks of rows: one whole block,
    several with a partial last one, and none at all (a block is a product of other
    shapes than the whole: to rounding)."""
    rng = np.random.default_rng(rows)
    arrays = [rng.normal(size=s) for s in (shape, (8, 6), (6, 8), (8, 6))]  # x, w1, w2, w3
    g = rng.normal(size=shape)
    out_f, out_c, f, c = _swiglu_pair(arrays, g)
    assert out_f.op == "swiglu" and out_c.op == "matmul" and out_f.shape == shape
    _assert_swiglu_close(out_f, out_c, f, c, g)


def test_fused_swiglu_gives_the_gradient_only_to_inputs_that_require_it():
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=s) for s in ((3, 4), (4, 5), (5, 4), (4, 5))]
    for requires in [(True, False, False, False), (False, True, True, True),
                     (False, False, True, False), (False, True, False, False)]:
        g = rng.normal(size=(3, 4))
        out_f, out_c, f, c = _swiglu_pair(arrays, g, requires)
        _assert_swiglu_close(out_f, out_c, f, c, g)


def test_fused_swiglu_reference_value_and_gradient_checker():
    one = Tensor(np.eye(2))  # out = silu(x)·x: silu(2)·2 = 4·sigmoid(2)
    out = fused.swiglu(Tensor([[0.0, 2.0]]), one, one, one)
    np.testing.assert_allclose(out.data, [[0.0, 4.0 / (1.0 + np.exp(-2.0))]], rtol=1e-15)
    rng = np.random.default_rng(6)
    x, w1, w2, w3 = (Tensor(rng.normal(size=s), requires_grad=True)
                     for s in ((2, 3, 4), (4, 5), (5, 4), (4, 5)))
    result = gradcheck(fused.swiglu, x, w1, w2, w3, grad_output=rng.normal(size=(2, 3, 4)))
    assert result.passed, result


@settings(max_examples=40, deadline=None)
@given(lead=hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), d=st.integers(1, 5),
       F=st.integers(1, 6), data=st.data())
def test_fused_swiglu_equals_the_composed_lines_for_any_shape(lead, d, F, data):
    """Any leading axes, widths and values (large ones too: silu's saturation)."""
    values = _floats(-40, 40)
    arrays = [data.draw(hnp.arrays(np.float64, s, elements=values))
              for s in ((*lead, d), (d, F), (F, d), (d, F))]
    g = data.draw(hnp.arrays(np.float64, (*lead, d), elements=values))
    out_f, out_c, f, c = _swiglu_pair(arrays, g)
    _assert_swiglu_close(out_f, out_c, f, c, g)

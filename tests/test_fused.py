"""The fused nodes give the composed ops' numbers (issue 18; L6, L7): attention, rms_norm,
swiglu."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from glassllm import Tensor, layers
from glassllm.fused import (
    attention,
    attention_composed,
    causal_attention,
    causal_attention_composed,
    rms_norm,
    rms_norm_composed,
    swiglu,
    swiglu_composed,
)
from glassllm.gradcheck import gradcheck
from glassllm.layers import ATTENTION_PROBE, GlassConfig, GlassLM, rope_angles


def _inputs(rng, B, H, Hkv, n, dk):
    shapes = [(B, H, n, dk), (B, Hkv, n, dk), (B, Hkv, n, dk)]
    return [rng.normal(size=s) for s in shapes]


@pytest.mark.parametrize(("H", "Hkv"), [(4, 4), (4, 2), (4, 1), (6, 3)])
def test_fused_attention_equals_the_composed_ops_values_and_gradients(H, Hkv):
    rng = np.random.default_rng(H * 10 + Hkv)
    arrays = _inputs(rng, 2, H, Hkv, 5, 4)
    g = rng.normal(size=(2, H, 5, 4))
    fused = [Tensor(a, requires_grad=True) for a in arrays]
    composed = [Tensor(a, requires_grad=True) for a in arrays]
    out_f, out_c = causal_attention(*fused), causal_attention_composed(*composed)
    out_f.backward(g)
    out_c.backward(g)
    assert out_f.shape == (2, H, 5, 4)
    assert np.array_equal(out_f.data, out_c.data)  # the same products, in the same order
    for f, c in zip(fused, composed, strict=True):
        # a key/value head's gradient sums its r query heads in another order, and the
        # softmax's row sum Σ_j dp·p runs as one einsum: the last bits may differ
        np.testing.assert_allclose(f.grad, c.grad, rtol=0, atol=1e-14)
        _close(f.grad, c.grad)


@pytest.mark.parametrize("dk", [2, 6, 16])
def test_fused_attention_scales_by_root_dk_as_the_composed_ops_do(dk):
    """√16 = 4 is a power of two, so the fused node multiplies by 1/4 (exact); √2 and √6
    are not, so it divides. Either way the composed ops' bits."""
    rng = np.random.default_rng(dk)
    arrays = _inputs(rng, 2, 4, 2, 6, dk)
    g = rng.normal(size=(2, 4, 6, dk))
    fused = [Tensor(a, requires_grad=True) for a in arrays]
    composed = [Tensor(a, requires_grad=True) for a in arrays]
    out_f, out_c = causal_attention(*fused), causal_attention_composed(*composed)
    out_f.backward(g)
    out_c.backward(g)
    assert np.array_equal(out_f.data, out_c.data)
    for f, c in zip(fused, composed, strict=True):
        np.testing.assert_allclose(f.grad, c.grad, rtol=0, atol=1e-14)


def test_fused_attention_is_causal_query_0_sees_only_key_0():
    q = Tensor(np.zeros((1, 1, 3, 2)))
    k = Tensor(np.zeros((1, 1, 3, 2)))
    v = Tensor(np.array([[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]]]))
    out = causal_attention(q, k, v).data[0, 0]  # equal scores: the mean of the visible rows
    assert out.tolist() == [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]


def test_fused_attention_passes_the_gradient_checker():
    rng = np.random.default_rng(7)
    q, k, v = (Tensor(a, requires_grad=True) for a in _inputs(rng, 1, 4, 2, 4, 2))
    result = gradcheck(causal_attention, q, k, v, grad_output=rng.normal(size=(1, 4, 4, 2)))
    assert result.passed, result


def test_fused_attention_refuses_shapes_that_do_not_group():
    q = Tensor(np.zeros((1, 4, 3, 2)))
    with pytest.raises(ValueError, match=r"Hkv dividing H"):
        causal_attention(q, Tensor(np.zeros((1, 3, 3, 2))), Tensor(np.zeros((1, 3, 3, 2))))
    with pytest.raises(ValueError, match=r"q must be \(B, H, n, dk\)"):
        causal_attention(Tensor(np.zeros((4, 3, 2))), q, q)


def _layer_pair(rng, B, n, H, Hkv, dk, requires=(True,) * 5):
    """The fused and the composed attention layer, forward and backward, on the same
    x (B, n, H·dk) and weights; returns (out_f, out_c, fused inputs, composed inputs)."""
    d = H * dk
    arrays = [rng.normal(size=(B, n, d))] + [
        rng.normal(size=s) * d**-0.5 for s in ((d, H * dk), (d, Hkv * dk), (d, Hkv * dk),
                                                (H * dk, d))]
    cos, sin = rope_angles(n, dk)
    g = rng.normal(size=(B, n, d))
    fused = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    composed = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    out_f = attention(*fused, H, Hkv, cos, sin)
    out_c = attention_composed(*composed, H, Hkv, cos, sin)
    if any(requires):
        out_f.backward(g)
        out_c.backward(g)
    return out_f, out_c, fused, composed


@pytest.mark.parametrize(("H", "Hkv", "dk"), [(4, 4, 4), (4, 2, 16), (4, 1, 2), (6, 3, 6)])
def test_fused_attention_layer_equals_the_composed_ops_values_and_gradients(H, Hkv, dk):
    out_f, out_c, fused, composed = _layer_pair(np.random.default_rng(H + dk), 2, 5, H, Hkv, dk)
    assert out_f.op == "attention" and out_f.shape == (2, 5, H * dk)
    assert np.array_equal(out_f.data, out_c.data)  # the same operations in the same order
    for name, f, c in zip(["x", "wq", "wk", "wv", "wo"], fused, composed, strict=True):
        # x's gradient through the three projections is one product: another sum order
        _close(f.grad, c.grad, name)


def test_fused_attention_layer_gives_the_gradient_only_to_inputs_that_require_it():
    rng = np.random.default_rng(8)
    for requires in [(True, False, False, False, False), (False, True, True, True, True),
                     (False, False, False, False, True), (False, False, False, True, False),
                     (False, True, False, False, False)]:
        _, _, fused, composed = _layer_pair(rng, 1, 4, 4, 2, 4, requires)
        for f, c in zip(fused, composed, strict=True):
            assert (f.grad is None) == (c.grad is None)
            if c.grad is not None:
                _close(f.grad, c.grad)


def test_fused_attention_layer_passes_the_gradient_checker():
    rng = np.random.default_rng(9)
    x, wq, wk, wv, wo = (Tensor(rng.normal(size=s), requires_grad=True)
                         for s in ((2, 3, 8), (8, 8), (8, 4), (8, 4), (8, 8)))
    cos, sin = rope_angles(3, 4)
    result = gradcheck(lambda *t: attention(*t, 2, 1, cos, sin), x, wq, wk, wv, wo,
                       grad_output=rng.normal(size=(2, 3, 8)))
    assert result.passed, result


def test_layers_attention_runs_the_fused_layer_unless_a_probe_is_set():
    rng = np.random.default_rng(10)
    x, wq, wk, wv, wo = (Tensor(rng.normal(size=s))
                         for s in ((1, 3, 8), (8, 8), (8, 4), (8, 4), (8, 8)))
    cos, sin = rope_angles(3, 4)
    fused = layers.attention(x, wq, wk, wv, wo, 2, 1, cos, sin)
    token = ATTENTION_PROBE.set(lambda weights: weights)
    try:
        composed = layers.attention(x, wq, wk, wv, wo, 2, 1, cos, sin)
    finally:
        ATTENTION_PROBE.reset(token)
    assert fused.op == "attention" and composed.op == "matmul"
    assert np.array_equal(fused.data, composed.data)


def _twin_models():
    """Two identical small GQA models (same seed) and one batch: one runs fused, one not."""
    config = GlassConfig(d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=24,
                         max_seq_len=8, vocab=32, seed=3)
    rng = np.random.default_rng(0)
    ids, targets = rng.integers(0, 32, size=(2, 8)), rng.integers(0, 32, size=(2, 8))
    return GlassLM(config), GlassLM(config), ids, targets


def test_model_loss_and_gradients_match_with_the_composed_attention():
    """A probe that changes nothing forces the composed path: same loss, same gradients."""
    fused_model, composed_model, ids, targets = _twin_models()
    fused_loss = fused_model.loss(ids, targets)
    fused_loss.backward()
    token = ATTENTION_PROBE.set(lambda weights: weights)
    try:
        composed_loss = composed_model.loss(ids, targets)
    finally:
        ATTENTION_PROBE.reset(token)
    composed_loss.backward()
    assert fused_loss.item() == pytest.approx(composed_loss.item(), rel=0, abs=1e-14)
    for (name, p), (_, c) in zip(fused_model.named_parameters(),
                                 composed_model.named_parameters(), strict=True):
        np.testing.assert_allclose(p.grad, c.grad, rtol=0, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("shape", [(8,), (3, 8), (2, 5, 8)])
def test_fused_rms_norm_equals_the_composed_ops_values_and_gradients(shape):
    rng = np.random.default_rng(len(shape))
    x, w, g = rng.normal(size=shape), rng.normal(size=8), rng.normal(size=shape)
    fused = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    composed = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    out_f, out_c = rms_norm(*fused, eps=1e-5), rms_norm_composed(*composed, eps=1e-5)
    out_f.backward(g)
    out_c.backward(g)
    assert np.array_equal(out_f.data, out_c.data)  # the same operations in the same order
    for f, c in zip(fused, composed, strict=True):
        np.testing.assert_allclose(f.grad, c.grad, rtol=0, atol=1e-14)


def test_fused_rms_norm_reference_value_and_gradient_checker():
    out = rms_norm(Tensor([[3.0, 4.0]]), Tensor([1.0, 2.0]), eps=0.0)  # rms = sqrt(12.5)
    np.testing.assert_allclose(out.data, [[3 / 12.5**0.5, 8 / 12.5**0.5]], rtol=1e-15)
    rng = np.random.default_rng(3)
    x = Tensor(rng.normal(size=(2, 3, 4)), requires_grad=True)
    w = Tensor(rng.normal(size=4), requires_grad=True)
    assert gradcheck(rms_norm, x, w, grad_output=rng.normal(size=(2, 3, 4))).passed


def _close(fused: np.ndarray, composed: np.ndarray, name: str = "", terms: float = 0.0) -> None:
    """Equal to 1e-12 of the largest entry, or of ``terms``, the size of the terms that
    were summed: a sum may run in another order (BLAS, einsum), and where terms cancel
    to ~0 the composed ops' result is rounding noise of that size."""
    scale = max(float(np.max(np.abs(composed), initial=0.0)), terms, 1e-300)
    np.testing.assert_allclose(fused, composed, rtol=1e-12, atol=1e-12 * scale, err_msg=name)


def _swiglu_pair(arrays, g, requires=(True, True, True, True)):
    """Run the fused and the composed swiglu forward and backward on the same arrays."""
    fused = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    composed = [Tensor(a, requires_grad=r) for a, r in zip(arrays, requires, strict=True)]
    out_f, out_c = swiglu(*fused), swiglu_composed(*composed)
    out_f.backward(g)
    out_c.backward(g)
    return out_f, out_c, fused, composed


@pytest.mark.parametrize("shape", [(8,), (5, 8), (2, 3, 8)])
def test_fused_swiglu_equals_the_composed_ops_values_and_gradients(shape):
    rng = np.random.default_rng(len(shape))
    arrays = [rng.normal(size=s) for s in (shape, (8, 6), (6, 8), (8, 6))]  # x, w1, w2, w3
    out_f, out_c, fused, composed = _swiglu_pair(arrays, rng.normal(size=shape))
    assert out_f.shape == shape
    _close(out_f.data, out_c.data)
    for name, f, c in zip(["x", "w1", "w2", "w3"], fused, composed, strict=True):
        _close(f.grad, c.grad, name)


@pytest.mark.parametrize("rows", [0, 64, 150])
def test_fused_swiglu_equals_the_composed_ops_over_several_row_blocks(rows):
    """The forward runs on blocks of 64 rows: a whole block, several with a partial
    last one, and none at all give the composed ops' values bit for bit."""
    rng = np.random.default_rng(rows)
    arrays = [rng.normal(size=s) for s in ((rows, 8), (8, 6), (6, 8), (8, 6))]
    out_f, out_c, fused, composed = _swiglu_pair(arrays, rng.normal(size=(rows, 8)))
    assert out_f.shape == (rows, 8)
    assert np.array_equal(out_f.data, out_c.data)
    for name, f, c in zip(["x", "w1", "w2", "w3"], fused, composed, strict=True):
        _close(f.grad, c.grad, name)


def test_fused_swiglu_gives_the_gradient_only_to_inputs_that_require_it():
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=s) for s in ((3, 4), (4, 5), (5, 4), (4, 5))]
    for requires in [(True, False, False, False), (False, True, True, True),
                     (False, False, True, False), (False, True, False, False)]:
        _, _, fused, composed = _swiglu_pair(arrays, rng.normal(size=(3, 4)), requires)
        for f, c in zip(fused, composed, strict=True):
            assert (f.grad is None) == (c.grad is None)
            if c.grad is not None:
                _close(f.grad, c.grad)


def test_fused_swiglu_reference_value_and_gradient_checker():
    one = Tensor(np.eye(2))  # out = silu(x)·x: silu(2)·2 = 4·sigmoid(2)
    out = swiglu(Tensor([[0.0, 2.0]]), one, one, one)
    np.testing.assert_allclose(out.data, [[0.0, 4.0 / (1.0 + np.exp(-2.0))]], rtol=1e-15)
    rng = np.random.default_rng(6)
    x, w1, w2, w3 = (Tensor(rng.normal(size=s), requires_grad=True)
                     for s in ((2, 3, 4), (4, 5), (5, 4), (4, 5)))
    result = gradcheck(swiglu, x, w1, w2, w3, grad_output=rng.normal(size=(2, 3, 4)))
    assert result.passed, result


@settings(max_examples=40, deadline=None)
@given(
    lead=hnp.array_shapes(min_dims=0, max_dims=2, max_side=4),
    d=st.integers(1, 5),
    F=st.integers(1, 6),
    data=st.data(),
)
def test_fused_swiglu_equals_the_composed_ops_for_any_shape(lead, d, F, data):
    """Any leading axes, widths and values (large ones too: silu's saturation)."""
    values = st.floats(-40, 40, allow_nan=False, allow_infinity=False)
    arrays = [data.draw(hnp.arrays(np.float64, s, elements=values))
              for s in ((*lead, d), (d, F), (F, d), (d, F))]
    g = data.draw(hnp.arrays(np.float64, (*lead, d), elements=values))
    out_f, out_c, fused, composed = _swiglu_pair(arrays, g)
    _close(out_f.data, out_c.data)
    for name, f, c in zip(["x", "w1", "w2", "w3"], fused, composed, strict=True):
        _close(f.grad, c.grad, name)


def test_model_loss_and_gradients_match_with_the_composed_swiglu(monkeypatch):
    """The whole model with swiglu composed from autograd's ops: same loss, same gradients."""
    fused_model, composed_model, ids, targets = _twin_models()
    fused_loss = fused_model.loss(ids, targets)
    fused_loss.backward()
    monkeypatch.setattr(layers, "fused_swiglu", swiglu_composed)
    composed_loss = composed_model.loss(ids, targets)
    composed_loss.backward()
    assert fused_loss.item() == pytest.approx(composed_loss.item(), rel=1e-14, abs=0)
    for (name, p), (_, c) in zip(fused_model.named_parameters(),
                                 composed_model.named_parameters(), strict=True):
        _close(p.grad, c.grad, name)


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 2),
    Hkv=st.integers(1, 3),
    r=st.integers(1, 3),
    n=st.integers(1, 9),
    dk=st.integers(1, 9),
    data=st.data(),
)
def test_fused_attention_equals_the_composed_ops_for_any_shape(B, Hkv, r, n, dk, data):
    """Any grouping r = H/Hkv, length and head width (√dk a power of two or not)."""
    values = st.floats(-6, 6, allow_nan=False, allow_infinity=False)
    shapes = [(B, Hkv * r, n, dk), (B, Hkv, n, dk), (B, Hkv, n, dk)]
    arrays = [data.draw(hnp.arrays(np.float64, s, elements=values)) for s in shapes]
    g = data.draw(hnp.arrays(np.float64, shapes[0], elements=values))
    fused = [Tensor(a, requires_grad=True) for a in arrays]
    composed = [Tensor(a, requires_grad=True) for a in arrays]
    out_f, out_c = causal_attention(*fused), causal_attention_composed(*composed)
    out_f.backward(g)
    out_c.backward(g)
    big = max(1.0, *(float(np.max(np.abs(a))) for a in arrays))
    # the same products and sums, but not always bit for bit: with dk = 1 the weighted
    # values are NumPy's matrix-vector product, which may sum a row in another order for
    # the r·n stacked rows than for n (found here: q (1, 2, 9, 1), 1 ulp)
    _close(out_f.data, out_c.data, "out", big)
    terms = float(np.max(np.abs(g))) * big**3 * n  # |g|·|v|·|q or k|² over n keys
    for name, f, c in zip("qkv", fused, composed, strict=True):
        _close(f.grad, c.grad, name, terms)


@settings(max_examples=40, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
    eps=st.sampled_from([0.0, 1e-6, 1e-5, 1.0]),
    data=st.data(),
)
def test_fused_rms_norm_equals_the_composed_ops_for_any_shape(shape, eps, data):
    """Any leading axes and width; values away from an all-zero row when eps = 0."""
    values = st.floats(0.1, 40) | st.floats(-40, -0.1)
    x = data.draw(hnp.arrays(np.float64, shape, elements=values))
    w = data.draw(hnp.arrays(np.float64, shape[-1:], elements=st.floats(-3, 3)))
    g = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-3, 3)))
    fused = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    composed = [Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)]
    out_f, out_c = rms_norm(*fused, eps=eps), rms_norm_composed(*composed, eps=eps)
    out_f.backward(g)
    out_c.backward(g)
    assert np.array_equal(out_f.data, out_c.data)
    inv_rms = 1.0 / np.sqrt(np.mean(x * x, axis=-1) + eps)  # ≤ 10: |x| ≥ 0.1
    d, rows = shape[-1], g.size // shape[-1]
    # x: r·gy and r·y·mean(gy·y), |y| ≤ √d, |w| ≤ 3; weight: a sum of rows of g·y
    terms = float(np.max(np.abs(g))) * (3.0 * float(np.max(inv_rms)) * d + d**0.5 * rows)
    for name, f, c in zip(["x", "weight"], fused, composed, strict=True):
        _close(f.grad, c.grad, name, terms)


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 2),
    Hkv=st.integers(1, 3),
    r=st.integers(1, 3),
    n=st.integers(1, 7),
    half_dk=st.integers(1, 4),
    data=st.data(),
)
def test_fused_attention_layer_equals_the_composed_ops_for_any_shape(B, Hkv, r, n, half_dk,
                                                                      data):
    """Any grouping, length and (even) head width, any values in [−3, 3]."""
    H, dk = Hkv * r, 2 * half_dk
    d = H * dk
    values = st.floats(-3, 3, allow_nan=False, allow_infinity=False)
    shapes = [(B, n, d), (d, H * dk), (d, Hkv * dk), (d, Hkv * dk), (H * dk, d)]
    arrays = [data.draw(hnp.arrays(np.float64, s, elements=values)) for s in shapes]
    g = data.draw(hnp.arrays(np.float64, (B, n, d), elements=values))
    cos, sin = rope_angles(n, dk)
    fused = [Tensor(a, requires_grad=True) for a in arrays]
    composed = [Tensor(a, requires_grad=True) for a in arrays]
    out_f = attention(*fused, H, Hkv, cos, sin)
    out_c = attention_composed(*composed, H, Hkv, cos, sin)
    out_f.backward(g)
    out_c.backward(g)
    _close(out_f.data, out_c.data, "out")
    # where a gradient cancels to ~0 (one position: softmax is 1 whatever q and k), both
    # are rounding noise of the layer's other gradients: 1e-12 of the largest of them
    terms = max(float(np.max(np.abs(c.grad))) for c in composed)
    for name, f, c in zip(["x", "wq", "wk", "wv", "wo"], fused, composed, strict=True):
        _close(f.grad, c.grad, name, terms)

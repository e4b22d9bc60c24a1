"""glassllm.layers functional forms (SPEC L6.2, L7): values, gradients, causality,
GQA vs multi-head attention, RoPE's relative-position property, errors."""

import doctest
import math

import numpy as np
import pytest

import glassllm.layers as layers_module
from glassllm import Tensor, gradcheck
from glassllm.autograd import rope
from glassllm.layers import (
    attention,
    linear,
    rms_norm,
    rope_angles,
    swiglu,
    transformer_block,
)


def _t(rng, *shape, scale=1.0):
    return Tensor(rng.normal(0.0, scale, size=shape), requires_grad=True)


def _assert_gradcheck(fn, *inputs, rng):
    out = fn(*inputs)
    grad_output = rng.normal(size=out.shape)  # not all ones: sums can hide errors
    result = gradcheck(fn, *inputs, grad_output=grad_output, atol=1e-6, rtol=1e-5)
    assert result.passed, result


def _attention_weights(rng, d, n_heads, n_kv_heads):
    dk = d // n_heads
    return [
        _t(rng, d, n_heads * dk, scale=0.5),
        _t(rng, d, n_kv_heads * dk, scale=0.5),
        _t(rng, d, n_kv_heads * dk, scale=0.5),
        _t(rng, n_heads * dk, d, scale=0.5),
    ]


# --- L6.2 rope_angles ------------------------------------------------------------------


def test_rope_angles_exact_values():
    # theta=100, dk=4: frequencies theta^(-0/4)=1 and theta^(-2/4)=0.1; positions 0, 1, 2.
    cos, sin = rope_angles(3, 4, theta=100.0)
    angles = np.array([[0.0, 0.0], [1.0, 0.1], [2.0, 0.2]])
    assert cos.shape == sin.shape == (3, 2)
    np.testing.assert_allclose(cos, np.cos(angles), rtol=0, atol=1e-15)
    np.testing.assert_allclose(sin, np.sin(angles), rtol=0, atol=1e-15)
    assert cos[0].tolist() == [1.0, 1.0] and sin[0].tolist() == [0.0, 0.0]


def test_rope_angles_default_theta_and_offset():
    cos, sin = rope_angles(8, 6)  # theta = 10000: frequencies 1, 10000^(-1/3), 10000^(-2/3)
    np.testing.assert_allclose(sin[5], np.sin(5 * 10000.0 ** -(np.arange(0, 6, 2) / 6)))
    cos_off, sin_off = rope_angles(3, 6, offset=5)  # positions 5, 6, 7
    np.testing.assert_array_equal(cos_off, cos[5:])
    np.testing.assert_array_equal(sin_off, sin[5:])


@pytest.mark.parametrize("dk", [3, 7, 0])
def test_rope_angles_rejects_odd_dk(dk):
    with pytest.raises(ValueError, match=f"dk={dk}"):
        rope_angles(4, dk)


def test_rope_pair_rotation_is_complex_product():
    # L6.1 / L6.2: rotating (x0, x1) by angle equals (x0 + i x1) · e^{i angle}.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 1, 5, 8))
    cos, sin = rope_angles(5, 8, offset=3)
    rotated = rope(Tensor(x), cos, sin).data
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * (cos + 1j * sin)
    np.testing.assert_allclose(rotated[..., 0::2], z.real, atol=1e-14)
    np.testing.assert_allclose(rotated[..., 1::2], z.imag, atol=1e-14)


def test_rope_relative_position_property():
    # Su et al. 2021: <rope(q, p), rope(k, s)> depends only on p - s.
    rng = np.random.default_rng(2)
    dk = 8
    q, k = rng.normal(size=(1, 1, 1, dk)), rng.normal(size=(1, 1, 1, dk))

    def score(p, s):
        qp = rope(Tensor(q), *rope_angles(1, dk, offset=p)).data
        ks = rope(Tensor(k), *rope_angles(1, dk, offset=s)).data
        return float(np.sum(qp * ks))

    for distance in [0, 1, 3, 17]:
        base = score(distance, 0)
        for start in [1, 5, 40, 1000]:
            assert score(start + distance, start) == pytest.approx(base, abs=1e-12)
    assert score(3, 0) != pytest.approx(score(4, 0), abs=1e-6)  # distance does matter


# --- RMSNorm, linear, SwiGLU: values and gradients ------------------------------------


def test_rms_norm_values():
    x = Tensor([[3.0, 4.0], [1.0, -1.0]])
    out = rms_norm(x, Tensor([1.0, 2.0]), eps=0.0).data
    rms = np.array([[math.sqrt(12.5)], [1.0]])
    np.testing.assert_allclose(out, np.array([[3.0, 8.0], [1.0, -2.0]]) / rms)
    # eps enters under the root: mean(x^2) = 1 → 1 / sqrt(1 + 3) = 0.5
    np.testing.assert_allclose(
        rms_norm(Tensor([1.0, -1.0]), Tensor([1.0, 1.0]), eps=3.0).data, [0.5, -0.5]
    )


def test_rms_norm_gradcheck():
    rng = np.random.default_rng(3)
    x, w = _t(rng, 2, 3, 5), _t(rng, 5)
    _assert_gradcheck(lambda x, w: rms_norm(x, w), x, w, rng=rng)


def test_linear_values_and_torch_convention():
    x = Tensor([[1.0, 2.0]])
    w = Tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])  # (d_in=2, d_out=3)
    assert linear(x, w).data.tolist() == [[1.0, 2.0, 3.0]]
    torch_weight = w.data.T  # PyTorch stores (out, in) and computes x @ W.T
    # exact whatever the kernel: small integers, every product and sum is exact
    np.testing.assert_array_equal(linear(x, w).data, x.data @ torch_weight.T)


def test_linear_gradcheck():
    rng = np.random.default_rng(4)
    _assert_gradcheck(linear, _t(rng, 2, 3, 4), _t(rng, 4, 5), rng=rng)


def test_swiglu_values():
    rng = np.random.default_rng(5)
    x, w1, w2, w3 = (
        rng.normal(size=(2, 4)),
        rng.normal(size=(4, 6)),
        rng.normal(size=(6, 4)),
        rng.normal(size=(4, 6)),
    )
    a = x @ w1
    expected = ((a / (1 + np.exp(-a))) * (x @ w3)) @ w2
    out = swiglu(Tensor(x), Tensor(w1), Tensor(w2), Tensor(w3)).data
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_swiglu_gradcheck():
    rng = np.random.default_rng(6)
    _assert_gradcheck(
        swiglu, _t(rng, 2, 3, 4), _t(rng, 4, 6), _t(rng, 6, 4), _t(rng, 4, 6), rng=rng
    )


# --- attention ------------------------------------------------------------------------


def _mha_reference(x, wq, wk, wv, wo, n_heads, n_kv_heads, theta=10000.0):
    """Causal attention written independently: loops over batch, head, query; RoPE as a
    complex product; key/value head of query head h is h // (H / Hkv)."""
    B, n, d = x.shape
    dk = d // n_heads
    group = n_heads // n_kv_heads
    freqs = theta ** (-np.arange(0, dk, 2) / dk)
    phase = np.exp(1j * np.arange(n)[:, None] * freqs)  # (n, dk/2)

    def rot(v):  # (n, dk) → rotated
        z = (v[:, 0::2] + 1j * v[:, 1::2]) * phase
        return np.stack([z.real, z.imag], axis=-1).reshape(v.shape)

    out = np.zeros((B, n, n_heads * dk))
    for b in range(B):
        q_all, k_all, v_all = x[b] @ wq, x[b] @ wk, x[b] @ wv
        for h in range(n_heads):
            kv = h // group
            q = rot(q_all[:, h * dk : (h + 1) * dk])
            k = rot(k_all[:, kv * dk : (kv + 1) * dk])
            v = v_all[:, kv * dk : (kv + 1) * dk]
            for t in range(n):
                s = q[t] @ k[: t + 1].T / math.sqrt(dk)  # only keys 0..t
                p = np.exp(s - s.max())
                p /= p.sum()
                out[b, t, h * dk : (h + 1) * dk] = p @ v[: t + 1]
    return out @ wo


@pytest.mark.parametrize("n_heads,n_kv_heads", [(4, 4), (4, 2), (4, 1), (2, 2)])
def test_attention_equals_independent_reference(n_heads, n_kv_heads):
    # Hkv == H is plain multi-head attention; GQA and MQA check the sharing.
    rng = np.random.default_rng(7)
    B, n, d = 2, 5, 16
    x = rng.normal(size=(B, n, d))
    w = [p.data for p in _attention_weights(rng, d, n_heads, n_kv_heads)]
    cos, sin = rope_angles(n, d // n_heads)
    out = attention(Tensor(x), *map(Tensor, w), n_heads, n_kv_heads, cos, sin).data
    np.testing.assert_allclose(out, _mha_reference(x, *w, n_heads, n_kv_heads), atol=1e-12)


def test_gqa_equals_mha_with_repeated_kv_weights():
    # Ainslie et al. 2023: GQA is MHA whose K/V projections are shared by adjacent heads.
    rng = np.random.default_rng(8)
    d, H, Hkv, dk, n = 8, 4, 2, 2, 4
    x = Tensor(rng.normal(size=(1, n, d)))
    wq, wk, wv, wo = _attention_weights(rng, d, H, Hkv)
    cos, sin = rope_angles(n, dk)

    def widen(w):  # (d, Hkv·dk) → (d, H·dk), head j → heads 2j, 2j+1
        return Tensor(np.repeat(w.data.reshape(d, Hkv, dk), H // Hkv, axis=1).reshape(d, H * dk))

    gqa = attention(x, wq, wk, wv, wo, H, Hkv, cos, sin).data
    mha = attention(x, wq, widen(wk), widen(wv), wo, H, H, cos, sin).data
    np.testing.assert_allclose(gqa, mha, atol=1e-13)


@pytest.mark.parametrize("n_heads,n_kv_heads,n", [(4, 2, 3), (4, 1, 3), (4, 4, 2), (4, 2, 1)])
def test_attention_gradcheck_every_input(n_heads, n_kv_heads, n):
    rng = np.random.default_rng(9)
    d = 8
    x = _t(rng, 2, n, d)
    cos, sin = rope_angles(n, d // n_heads)

    def fn(x, wq, wk, wv, wo):
        return attention(x, wq, wk, wv, wo, n_heads, n_kv_heads, cos, sin)

    _assert_gradcheck(fn, x, *_attention_weights(rng, d, n_heads, n_kv_heads), rng=rng)


def test_attention_is_causal_bit_identical():
    rng = np.random.default_rng(10)
    B, n, d, H, Hkv = 2, 6, 8, 4, 2
    w = _attention_weights(rng, d, H, Hkv)
    cos, sin = rope_angles(n, d // H)
    x = rng.normal(size=(B, n, d))
    base = attention(Tensor(x), *w, H, Hkv, cos, sin).data
    for t in range(n - 1):
        changed = x.copy()
        changed[:, t + 1 :] = rng.normal(size=changed[:, t + 1 :].shape) * 100
        out = attention(Tensor(changed), *w, H, Hkv, cos, sin).data
        # bit for bit: the same code on arrays of the same shapes, and a future key adds
        # an exact 0 (its probability is exactly 0), whatever its value
        np.testing.assert_array_equal(out[:, : t + 1], base[:, : t + 1])
        assert not np.array_equal(out[:, t + 1], base[:, t + 1])


def test_attention_first_position_attends_only_to_itself():
    # n = 1 (and position 0 in general): the softmax has one key, so out = (v0 rows) @ wo.
    rng = np.random.default_rng(11)
    d, H = 8, 4
    wq, wk, wv, wo = _attention_weights(rng, d, H, H)
    x = rng.normal(size=(1, 1, d))
    out = attention(Tensor(x), wq, wk, wv, wo, H, H, *rope_angles(1, d // H)).data
    np.testing.assert_allclose(out, x @ wv.data @ wo.data, atol=1e-14)


def test_attention_errors_name_both_numbers():
    rng = np.random.default_rng(12)
    x = Tensor(rng.normal(size=(1, 2, 8)))
    w = _attention_weights(rng, 8, 4, 2)
    with pytest.raises(ValueError, match=r"8.*3"):
        attention(x, *w, 3, 1, *rope_angles(2, 2))
    with pytest.raises(ValueError, match=r"4.*3"):
        attention(x, *w, 4, 3, *rope_angles(2, 2))
    with pytest.raises(ValueError, match=r"12/4 = 3"):
        x12 = Tensor(rng.normal(size=(1, 2, 12)))
        attention(x12, *_attention_weights(rng, 12, 4, 2), 4, 2, np.ones((2, 1)), np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"\(2, 1\)"):
        attention(x, *w, 4, 2, *rope_angles(3, 2))  # tables for the wrong n


# --- transformer block ----------------------------------------------------------------


def _block_weights(rng, d=8, n_heads=4, n_kv_heads=2, F=12):
    wq, wk, wv, wo = _attention_weights(rng, d, n_heads, n_kv_heads)
    attn_norm = Tensor(1.0 + 0.1 * rng.normal(size=d), requires_grad=True)
    ffn_norm = Tensor(1.0 + 0.1 * rng.normal(size=d), requires_grad=True)
    return [
        attn_norm,
        wq,
        wk,
        wv,
        wo,
        ffn_norm,
        _t(rng, d, F, scale=0.5),
        _t(rng, F, d, scale=0.5),
        _t(rng, d, F, scale=0.5),
    ]


def test_transformer_block_is_two_residuals():
    rng = np.random.default_rng(13)
    n, H, Hkv = 4, 4, 2
    x = Tensor(rng.normal(size=(2, n, 8)))
    an, wq, wk, wv, wo, fn_, w1, w2, w3 = _block_weights(rng)
    cos, sin = rope_angles(n, 2)
    h = x.data + attention(rms_norm(x, an), wq, wk, wv, wo, H, Hkv, cos, sin).data
    expected = h + swiglu(rms_norm(Tensor(h), fn_), w1, w2, w3).data
    out = transformer_block(x, an, wq, wk, wv, wo, fn_, w1, w2, w3, H, Hkv, cos, sin)
    np.testing.assert_allclose(out.data, expected, atol=1e-13)


@pytest.mark.parametrize("n_kv_heads,n", [(2, 3), (1, 2), (4, 1)])
def test_transformer_block_gradcheck_every_input(n_kv_heads, n):
    rng = np.random.default_rng(14)
    cos, sin = rope_angles(n, 2)

    def fn(x, *weights):
        return transformer_block(x, *weights, 4, n_kv_heads, cos, sin)

    _assert_gradcheck(fn, _t(rng, 2, n, 8), *_block_weights(rng, n_kv_heads=n_kv_heads), rng=rng)


def test_layers_docstring_examples_run():
    # STYLE 8: every docstring example is executed by the suite.
    result = doctest.testmod(layers_module)
    assert result.attempted > 10 and result.failed == 0
